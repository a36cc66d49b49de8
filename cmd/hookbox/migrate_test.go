package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
)

// TestMigrateSaysWhatItApplied: on a new database migrate lists the
// versions it applied; on an up-to-date one it says so with the version;
// on one a version behind, it names the version it applied.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		out := mustCLI(t, "migrate", "--db", dbURL)
		m := regexp.MustCompile(`^created the schema: applied versions 1, 2, [0-9, ]+ \(now at version ([0-9]+)\)\n$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("migrate on a new database printed %q; want the versions it applied", out)
		}
		latest := m[1]
		if out := mustCLI(t, "migrate", "--db", dbURL); out != "schema is up to date: version "+latest+"\n" {
			t.Fatalf("migrate on an up-to-date database printed %q", out)
		}

		// Take the database back one version by undoing the newest
		// migration, 00019_created_ranges on PostgreSQL (a BRIN index of
		// the received times)
		// and 00015_dead_keys on SQLite (an index of the dead deliveries
		// with an order key): through its Down section on PostgreSQL, by
		// hand on SQLite.
		newest, undo := "15", []string{`DROP INDEX events_dead_keys`, `DELETE FROM goose_db_version WHERE version_id = 15`}
		if strings.HasPrefix(dbURL, "postgres") {
			newest, undo = "19", nil
			pgtest.MigrateDownTo(t, dbURL, 18)
		}
		if latest != newest {
			t.Fatalf("the newest migration is %s: make this test undo it instead of %s", latest, newest)
		}
		if len(undo) > 0 {
			ctx := context.Background()
			st, err := service.OpenStore(ctx, dbURL, service.StoreOptions{Existing: true})
			if err != nil {
				t.Fatal(err)
			}
			err = st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				for _, q := range undo {
					if _, err := tx.ExecContext(ctx, q); err != nil {
						return fmt.Errorf("%s: %w", q, err)
					}
				}
				return nil
			})
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		n, _ := strconv.Atoi(latest)
		want := fmt.Sprintf("upgraded the schema from version %d: applied version %s (now at version %s)\n", n-1, latest, latest)
		if out := mustCLI(t, "migrate", "--db", dbURL); out != want {
			t.Fatalf("migrate on a database one version behind printed %q, want %q", out, want)
		}
	})
}

// TestMigrateNeverShowsPassword: a database that cannot be reached fails
// migrate without the URL's password in the message.
func TestMigrateNeverShowsPassword(t *testing.T) {
	_, _, err := runCLI(t, "migrate", "--db", "postgres://u:pw-not-shown-0123@127.0.0.1:1/x?connect_timeout=2")
	if err == nil || strings.Contains(err.Error(), "pw-not-shown") {
		t.Fatalf("migrate against nothing: %v", err)
	}
}
