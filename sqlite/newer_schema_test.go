package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
)

// TestOpenRefusesNewerSchema: a database a newer hookbox migrated (its
// version table records a version applied above the newest this hookbox
// embeds) is refused by Open, migrating or not, with an error matching
// hookbox.ErrNoSchema that says a newer hookbox migrated it; goose alone
// would ignore the unknown version and open it.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{false, true} {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Existing: existing})
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, hookbox.ErrNoSchema) || !strings.Contains(err.Error(), "newer hookbox") || !strings.Contains(err.Error(), "9999") {
			t.Errorf("Open (Existing %v) of a database at version 9999: %v; want ErrNoSchema saying a newer hookbox migrated it", existing, err)
		}
	}
}
