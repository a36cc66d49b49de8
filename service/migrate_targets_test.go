package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateToTargets: a database of the release before named targets
// (schema 6), holding done, dead and pending events with their attempts,
// migrates to schema 7 with every row intact: each stored event is its
// own one delivery, with the same status, attempts and history, and goes
// on working (claim, finish, replay); fan-out works on the same database.
// pgUndo9 takes a PostgreSQL schema back from 00009_no_foreign_keys.
var pgUndo9 = []string{
	`ALTER TABLE attempts ADD CONSTRAINT attempts_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE`,
	`ALTER TABLE events ADD CONSTRAINT events_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES events (id) ON DELETE CASCADE`,
	`DELETE FROM goose_db_version WHERE version_id = 9`,
}

func TestMigrateToTargets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		st := dbtest.Open(t, dbURL)
		rs, err := st.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("m", "done"), storetest.Delivery("m", "dead"), storetest.Delivery("m", "pending")})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 2, Lease: time.Minute, Sources: []string{"m"}, Now: now})
		if err != nil || len(evs) != 2 {
			t.Fatalf("claim: %v, %v", evs, err)
		}
		var outs []hookbox.Outcome
		for _, e := range evs {
			st := hookbox.StatusDone
			if e.DeliveryID == "dead" {
				st = hookbox.StatusDead
			}
			outs = append(outs, hookbox.Outcome{ID: e.ID, Owner: e.LeaseOwner, Attempt: e.Attempts, Status: st,
				Error: "failed for the test", StartedAt: now, FinishedAt: now})
		}
		if _, err := st.Finish(ctx, outs); err != nil {
			t.Fatal(err)
		}
		before := map[int64]hookbox.Event{}
		history := map[int64][]hookbox.Attempt{}
		for _, r := range rs {
			e, err := st.Event(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			before[r.ID] = e
			if history[r.ID], err = st.Attempts(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		// Back to schema 6: what the last release made.
		var undo []string
		if strings.HasPrefix(dbURL, "postgres") {
			pgtest.MigrateDownTo(t, dbURL, 9)
			undo = pgUndo9
		} else {
			undo = []string{`DROP INDEX events_dead_keys`, `DELETE FROM goose_db_version WHERE version_id = 15`,
				`DROP INDEX events_fanout`, `DROP INDEX events_dead`, `DELETE FROM goose_db_version WHERE version_id = 11`,
				`DROP INDEX events_leased_keys`, `DELETE FROM goose_db_version WHERE version_id = 9`}
		}
		execAll(t, st, append(undo, `DROP TABLE rejected_deliveries`, `DELETE FROM goose_db_version WHERE version_id = 8`,
			`DROP TABLE paused_targets`, `DROP INDEX events_order`, `DROP INDEX events_children`,
			`ALTER TABLE events DROP COLUMN order_key`, `ALTER TABLE events DROP COLUMN fanout`,
			`ALTER TABLE events DROP COLUMN parent_id`, `DELETE FROM goose_db_version WHERE version_id = 7`)...)
		st.Close()

		// Opening migrates to schema 7.
		st2, err := service.OpenStore(ctx, dbURL, service.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer st2.Close()
		for _, r := range rs {
			e, err := st2.Event(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			b := before[r.ID]
			if e.Status != b.Status || e.Attempts != b.Attempts || e.LastError != b.LastError || e.FanOut || e.Parent != 0 ||
				!slices.Equal(e.Payload, b.Payload) {
				t.Errorf("event %d after migrating: %+v, before %+v", r.ID, e, b)
			}
			as, err := st2.Attempts(ctx, r.ID)
			if err != nil || len(as) != len(history[r.ID]) {
				t.Errorf("event %d history after migrating: %+v, %v; before %+v", r.ID, as, err, history[r.ID])
			}
		}
		stats, err := st2.Stats(ctx, time.Now())
		if err != nil || stats.ByStatus[hookbox.StatusDone] != 1 || stats.ByStatus[hookbox.StatusDead] != 1 || stats.ByStatus[hookbox.StatusPending] != 1 {
			t.Errorf("stats after migrating: %+v, %v", stats, err)
		}
		left, err := st2.Claim(ctx, hookbox.ClaimParams{Owner: "o2", Limit: 10, Lease: time.Minute, Sources: []string{"m"}})
		if err != nil || len(left) != 1 || left[0].DeliveryID != "pending" {
			t.Fatalf("claim after migrating: %+v, %v", left, err)
		}
		res, err := st2.Replay(ctx, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "m", Status: hookbox.StatusDead}})
		if err != nil || len(res.Replayed) != 1 {
			t.Errorf("replay of the dead event after migrating: %+v, %v", res, err)
		}
		d := storetest.Delivery("m", "fan")
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}}
		if _, err := st2.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
			t.Fatal(err)
		}
		if evs, err := st2.Claim(ctx, hookbox.ClaimParams{Owner: "o3", Limit: 10, Lease: time.Minute, Sources: []string{"m/a"}}); err != nil || len(evs) != 1 {
			t.Errorf("a delivery stored after migrating: %+v, %v", evs, err)
		}
	})
}

// execAll runs the statements qs in one transaction of st, in order, and
// fails the test on the first error: a schema taken back by hand.
func execAll(t *testing.T, st interface {
	InTx(context.Context, func(context.Context, *hookbox.Tx) error) error
}, qs ...string) {
	t.Helper()
	err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		for _, q := range qs {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
