package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Refuse makes the database at dbURL refuse change ("UPDATE", "UPDATE OF
// status", "DELETE") of the row of table whose id is id, with a trigger,
// as a database that fails one statement of an operation part-way would,
// and returns what lifts the refusal. The table is named as the store at
// dbURL has it (SQLite's events are PostgreSQL's queue). One refusal at a
// time per database.
func Refuse(t testing.TB, dbURL, change, table string, id int64) (lift func()) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Exec(fmt.Sprintf(`CREATE TRIGGER refuse BEFORE %s ON %s WHEN OLD.id = %d
            BEGIN SELECT RAISE(ABORT, 'refused for the test'); END`, change, table, id)); err != nil {
			t.Fatal(err)
		}
		return func() {
			if _, err := db.Exec(`DROP TRIGGER refuse`); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	for _, q := range []string{
		`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$`,
		fmt.Sprintf(`CREATE TRIGGER refuse BEFORE %s ON %s FOR EACH ROW WHEN (OLD.id = %d) EXECUTE FUNCTION refuse()`, change, table, id),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if _, err := c.Exec(ctx, `DROP TRIGGER refuse ON `+table); err != nil {
			t.Fatal(err)
		}
	}
}
