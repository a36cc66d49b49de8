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

// TestOrphanMarkOfLockedBatchChargedBeforeRerun: as
// TestOrphanMarkOfLockedBatchIsKept, with the live pool that found the
// dead pool's mark working the poison queue too. Once the dead backend's
// transaction ends, that pool's picks pass over the event until the kept
// mark is charged (at its next record refresh): its next claim round ran
// it again at once, the death was never charged, and a poison event with
// max_attempts 1 ran a second time.
func TestOrphanMarkOfLockedBatchChargedBeforeRerun(t *testing.T) {
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

	var ran atomic.Int32
	p1 := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p1.SetPolicy("poison", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
	p1.Handle("poison", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { ran.Add(1); return nil })
	start(t, p1)

	// The server notices the dead client: its transaction rolls back.
	if err := wt.Rollback(); err != nil {
		t.Fatal(err)
	}
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
		p1.Notify()
		time.Sleep(10 * time.Millisecond)
	}
}
