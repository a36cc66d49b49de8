package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestOrphanMarkOfLockedBatchIsKept: a pool on another host picks a
// poison event, marks it, and its process dies (or its host vanishes)
// while the handler runs. Its PostgreSQL backend notices only later (TCP
// keepalive: up to two minutes, where a pool is taken for dead after
// one), so when another pool charges the dead pool's marks, the event's
// row is still locked by the dead transaction. The mark is kept and
// charged once that transaction has ended: Recover dropped it uncharged,
// and the next pool ran the event as if nothing had happened (a poison
// event that kills every process escaped max_attempts this way).
func TestOrphanMarkOfLockedBatchIsKept(t *testing.T) {
	s, id, dead := deadPoolHolding(t)
	// A pool starts (or finds "gone" stale) while the dead backend still
	// holds the row: it charges the dead pool's marks.
	p1 := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p1.Handle("unrelated", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
	start(t, p1)
	// The server notices the dead client: its transaction rolls back.
	if err := dead.Rollback(); err != nil {
		t.Fatal(err)
	}
	p2, ran := poisonPool(t, s)
	awaitDeathCharged(t, s, id, p2, ran)
}

// TestOrphanMarkOfLockedBatchChargedBeforeRerun: as
// TestOrphanMarkOfLockedBatchIsKept, with the live pool that found the
// dead pool's mark working the poison queue too. Once the dead backend's
// transaction ends, that pool's picks pass over the event until the kept
// mark is charged (at its next record refresh): its next claim round ran
// it again at once, the death was never charged, and a poison event with
// max_attempts 1 ran a second time.
func TestOrphanMarkOfLockedBatchChargedBeforeRerun(t *testing.T) {
	s, id, dead := deadPoolHolding(t)
	p1, ran := poisonPool(t, s)
	if err := dead.Rollback(); err != nil {
		t.Fatal(err)
	}
	awaitDeathCharged(t, s, id, p1, ran)
}

// deadPoolHolding stores a poison event on PostgreSQL and has a pool that
// left no record ("gone") pick and mark it in a work transaction of a
// store of its own, left open: the dead pool's backend, not yet gone. It
// returns the live side's store, the event and that transaction.
func deadPoolHolding(t *testing.T) (dbtest.Store, int64, hookbox.WorkTx) {
	t.Helper()
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	other := dbtest.Open(t, dbURL) // the host that dies
	ctx := context.Background()
	id := ingest(t, s, storetest.Delivery("poison", "1"))[0].ID
	wt, err := other.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wt.Rollback() })
	evs, _, err := wt.Pick(ctx, hookbox.ClaimParams{Owner: "gone-1", Limit: 1, Lease: time.Minute, Sources: []string{"poison"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Pick = %d events, %v; want 1", len(evs), err)
	}
	if err := wt.Mark(ctx, hookbox.Mark{Key: "gone/0", Worker: "gone", Events: evs}); err != nil {
		t.Fatal(err)
	}
	return s, id, wt
}

// poisonPool starts a pool that works the poison queue with
// max_attempts 1, and returns it with the count of its handler's runs.
func poisonPool(t *testing.T, s dbtest.Store) (*worker.Pool, *atomic.Int32) {
	t.Helper()
	var ran atomic.Int32
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.SetPolicy("poison", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
	p.Handle("poison", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { ran.Add(1); return nil })
	start(t, p)
	return p, &ran
}

// awaitDeathCharged awaits the end of the poison event id that p works
// (ran counting its handler's runs), and fails the test unless the death
// was charged: dead, the handler never run again.
func awaitDeathCharged(t *testing.T, s dbtest.Store, id int64, p *worker.Pool, ran *atomic.Int32) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDead || e.Status == hookbox.StatusDone {
			if e.Status != hookbox.StatusDead || ran.Load() != 0 {
				t.Fatalf("poison event after its process died: %s, attempts %d, handler ran %d times; want dead, charged the death, not run again",
					e.Status, e.Attempts, ran.Load())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("poison event still %s after 20 s", e.Status)
		}
		p.Notify()
		time.Sleep(10 * time.Millisecond)
	}
}
