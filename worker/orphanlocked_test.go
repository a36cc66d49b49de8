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
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	other := dbtest.Open(t, dbURL) // the host that dies
	ctx := context.Background()
	id := ingest(t, s, storetest.Delivery("poison", "1"))[0].ID

	wt, err := other.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := wt.Pick(ctx, hookbox.ClaimParams{Owner: "gone-1", Limit: 1, Lease: time.Minute, Sources: []string{"poison"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Pick = %d events, %v; want 1", len(evs), err)
	}
	if err := wt.Mark(ctx, hookbox.Mark{Key: "gone/0", Worker: "gone", Events: evs}); err != nil {
		t.Fatal(err)
	}

	// A pool starts (or finds "gone" stale) while the dead backend still
	// holds the row: it charges the dead pool's marks.
	p1 := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p1.Handle("unrelated", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
	start(t, p1)

	// The server notices the dead client: its transaction rolls back.
	if err := wt.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The death must still be charged: max_attempts 1 ends the event dead
	// without its handler running again.
	var ran atomic.Int32
	p2 := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p2.SetPolicy("poison", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
	p2.Handle("poison", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { ran.Add(1); return nil })
	start(t, p2)
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
		p2.Notify()
		time.Sleep(10 * time.Millisecond)
	}
}
