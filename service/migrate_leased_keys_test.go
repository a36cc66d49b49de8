package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateLeasedKeys: a database made before the index of leased
// order keys (PostgreSQL schema 10, SQLite 8), holding a keyed delivery
// that runs, migrates with its rows, and the new index knows the running
// one at once: an earlier delivery of its key, replayed, waits for it.
func TestMigrateLeasedKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		st := dbtest.Open(t, dbURL)
		var ds []hookbox.Delivery
		for _, id := range []string{"1", "2"} {
			d := storetest.Delivery("lk", id)
			d.FanOut, d.Routes = true, []hookbox.Route{{Target: "t", OrderKey: "k"}}
			ds = append(ds, d)
		}
		if _, err := st.Ingest(ctx, ds); err != nil {
			t.Fatal(err)
		}
		byKey := func(st hookbox.Queue, owner string) []hookbox.Event {
			t.Helper()
			evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: owner, Limit: 10, Lease: time.Minute,
				Sources: []string{"lk/t"}, ByKey: true})
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		first := byKey(st, "a")
		if len(first) != 1 || first[0].DeliveryID != "1" {
			t.Fatalf("first claim: %+v", first)
		}
		now := time.Now()
		if _, err := st.Finish(ctx, []hookbox.Outcome{{ID: first[0].ID, Owner: "a", Attempt: 1,
			Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
		if running := byKey(st, "b"); len(running) != 1 || running[0].DeliveryID != "2" {
			t.Fatalf("second claim: %+v", running)
		}

		// Back to the schema before the index, delivery 2 still running.
		if strings.HasPrefix(dbURL, "postgres") {
			st.Close()
			pgtest.MigrateDownTo(t, dbURL, 10)
		} else {
			execAll(t, st, `DROP INDEX events_leased_keys`, `DELETE FROM goose_db_version WHERE version_id = 9`)
			st.Close()
		}

		st2 := dbtest.Open(t, dbURL) // migrates
		evs, err := st2.Events(ctx, hookbox.Filter{Source: "lk/t"})
		if err != nil || len(evs) != 2 {
			t.Fatalf("after migrating: %d deliveries, %v", len(evs), err)
		}
		if res, err := st2.Replay(ctx, hookbox.ReplayParams{IDs: []int64{first[0].ID}, IncludeDone: true}); err != nil || len(res.Replayed) != 1 {
			t.Fatalf("replay of delivery 1: %+v, %v", res, err)
		}
		if evs := byKey(st2, "c"); len(evs) != 0 {
			t.Fatalf("after migrating, claimed %s while delivery 2 of its key runs", evs[0].DeliveryID)
		}
	})
}
