package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/queue"
	"github.com/hookbox/hookbox/storetest"
)

var errInjected = errors.New("injected: the store cannot begin a transaction")

// beginFails is the real store, but its n-th BeginWork (from 1) fails
// when fail says so.
type beginFails struct {
	dbtest.Store
	begins atomic.Int32
	fail   func(n int32) bool
}

func (s *beginFails) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	if s.fail(s.begins.Add(1)) {
		return nil, errInjected
	}
	return s.Store.BeginWork(ctx)
}

// TestWorkKeepsWhatItRecorded: Work commits in several transactions when
// a handler breaks the shared one (the culprit runs again alone, then the
// others together). When the store fails after the culprit's transaction
// committed, Work returns the error with the results: the culprit's
// outcome, recorded, and the others', still leased. It returned no
// results, and the caller, releasing every event, met a lease that had
// moved on for the culprit, whose outcome was then never reported.
func TestWorkKeepsWhatItRecorded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("app", "breaks"), storetest.Delivery("app", "other")}); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w-1", Limit: 2, Lease: time.Minute, Sources: []string{"app"}})
		if err != nil || len(evs) != 2 || evs[0].DeliveryID != "breaks" {
			t.Fatalf("Claim = %+v, %v; want both events, in order", evs, err)
		}
		// The first transaction (both events) is broken by the first; the
		// second (it alone) commits; the third (the other) cannot begin.
		store := &beginFails{Store: s, fail: func(n int32) bool { return n == 3 }}
		r := queue.Runner{Queue: store, Charge: func(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome {
			return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDead, Error: err.Error()}
		}}
		broke := false
		res, err := r.Work(ctx, evs, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
			done := hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDone}
			if ev.DeliveryID != "breaks" || broke {
				return done
			}
			broke = true
			// A failed statement that takes the whole transaction down,
			// which the handler ignores (see worker's TestBadHandlersGoDeadAlone).
			if tx.Dialect == hookbox.DialectSQLite {
				tx.ExecContext(ctx, `INSERT OR ROLLBACK INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
			} else {
				tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
			}
			return done
		})
		if !errors.Is(err, errInjected) {
			t.Fatalf("Work = %v, want the injected failure", err)
		}
		if n := store.begins.Load(); n != 3 {
			t.Fatalf("%d transactions begun, want 3", n)
		}
		if len(res) != 2 {
			t.Fatalf("Work returned %d results with its error, want 2", len(res))
		}
		if !res[0].Ran() || res[0].Outcome.Status != hookbox.StatusDone || res[0].Err != nil {
			t.Errorf("the culprit, worked alone and committed: %+v, want its done outcome", res[0])
		}
		if res[1].Ran() || res[1].Err != nil || res[1].Event.ID != evs[1].ID {
			t.Errorf("the other event, not recorded: %+v, want no outcome", res[1])
		}
		if e, err := s.Event(ctx, evs[0].ID); err != nil || e.Status != hookbox.StatusDone {
			t.Errorf("the culprit is %s (%v), want done", e.Status, err)
		}
		if e, err := s.Event(ctx, evs[1].ID); err != nil || e.Status != hookbox.StatusProcessing || e.LeaseOwner != "w-1" {
			t.Errorf("the other event is %s leased by %q (%v), want still leased to w-1", e.Status, e.LeaseOwner, err)
		}
	})
}
