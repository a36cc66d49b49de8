package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestOpenRefusesNewerSchema: a schema a newer hookbox migrated (its
// version table records a version applied above the newest this hookbox
// embeds) is refused by Open, migrating or not, with an error matching
// hookbox.ErrNoSchema that says a newer hookbox migrated it; goose alone
// would ignore the unknown version and open it.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	open(t, url).Close()
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`); err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{false, true} {
		s, err := postgres.Open(ctx, url, postgres.Options{Existing: existing})
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, hookbox.ErrNoSchema) || !strings.Contains(err.Error(), "newer hookbox") || !strings.Contains(err.Error(), "9999") {
			t.Errorf("Open (Existing %v) of a schema at version 9999: %v; want ErrNoSchema saying a newer hookbox migrated it", existing, err)
		}
	}
}
