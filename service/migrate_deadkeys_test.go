package service_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateToDeadKeysIndex: a database of the schema before the index
// of dead keyed deliveries (SQLite 14, PostgreSQL 16), holding a key held
// by a dead delivery with two waiting behind it, migrates when opened: the
// index is built over the rows already there, HeldKeys counts the key, and
// every row keeps its status.
func TestMigrateToDeadKeysIndex(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		st := dbtest.Open(t, dbURL)
		ids := storetest.SeedHeldKey(t, st, "mk", "app", "k", "died", "m1", "m2", "m3")
		index, table := "events_dead_keys", "sqlite_master WHERE type = 'index' AND name = $1"
		if strings.HasPrefix(dbURL, "postgres") {
			pgtest.MigrateDownTo(t, dbURL, 16)
			index, table = "queue_dead_keys", "pg_indexes WHERE indexname = $1 AND schemaname = current_schema()"
		} else {
			execAll(t, st, `DROP INDEX events_dead_keys`, `DELETE FROM goose_db_version WHERE version_id = 15`)
		}
		exists := func(st interface {
			InTx(context.Context, func(context.Context, *hookbox.Tx) error) error
		}) bool {
			t.Helper()
			var n int
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				return tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table, index).Scan(&n)
			})
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
		if exists(st) {
			t.Fatalf("%s still there after taking the schema back", index)
		}
		st.Close()

		st2, err := service.OpenStore(ctx, dbURL, service.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		if !exists(st2) {
			t.Fatalf("%s not built by the migration", index)
		}
		if got, err := st2.HeldKeys(ctx, []string{"mk/app"}); err != nil || !maps.Equal(got, map[string]int{"mk/app": 1}) {
			t.Errorf("HeldKeys after migrating = %v, %v; want mk/app: 1", got, err)
		}
		for i, want := range []hookbox.Status{hookbox.StatusDead, hookbox.StatusPending, hookbox.StatusPending} {
			if e, err := st2.Event(ctx, ids[i]); err != nil || e.Status != want {
				t.Errorf("delivery %d after migrating: %s, %v; want %s", ids[i], e.Status, err, want)
			}
		}
	})
}
