package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateSchemaWithCapitals: a schema whose name needs quoting
// (capitals, which PostgreSQL keeps in a quoted name) migrates like any
// other. Migration 00019 looked its own schema up by the name cast to
// regnamespace, which folds it to lower case: "schema hookbox_… does not
// exist", and hookbox could not start on such a schema.
func TestMigrateSchemaWithCapitals(t *testing.T) {
	base := pgtest.URL(t)
	name := fmt.Sprintf("Hookbox_%d", os.Getpid())
	pgtest.AdminExec(t, `CREATE SCHEMA "`+name+`"`)
	t.Cleanup(func() { pgtest.AdminExec(t, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`) })
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.WithSearchPath(base, `"`+name+`"`), postgres.Options{})
	if err != nil {
		t.Fatalf("Open on schema %q: %v", name, err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("m", "one")}); err != nil {
		t.Fatal(err)
	}
}
