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

// TestPauseSeenAfterAGoHandlerBatch: a pause committed by another process
// (an operator's `hookbox targets pause`) while this pool's claim loop runs
// a Go handler's transaction must hold the target's deliveries that are
// claimed after that transaction: README promises a pause is seen by every
// process within 0.2 s. The loop read the pauses at the top of its round,
// ran the Go handlers (a second here), and then claimed for targets with
// the set it read before they ran.
func TestPauseSeenAfterAGoHandlerBatch(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	operator := dbtest.Open(t, dbURL) // another process on the same database
	ctx := context.Background()

	started := make(chan struct{}, 1)
	var heldRan atomic.Int64
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.Handle("slow", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		select {
		case started <- struct{}{}:
		default:
		}
		time.Sleep(1500 * time.Millisecond)
		return nil
	})
	p.Route("held", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		heldRan.Add(1)
		return nil
	}))
	p.Route("free", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	start(t, p)

	ingest(t, s, storetest.Delivery("slow", "s1"))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the Go handler did not start")
	}
	// The handler runs in the claim loop's transaction: pause the target
	// from the other store, then a delivery for it and one for a target
	// not paused come in. Both are claimed in the round after the
	// handler, or only the second.
	if err := operator.PauseTarget(ctx, "held", "maintenance"); err != nil {
		t.Fatal(err)
	}
	rs := ingest(t, operator, storetest.Delivery("held", "h1"), storetest.Delivery("free", "f1"))
	awaitDone(t, s, rs[1].ID, 20*time.Second)
	ev, err := s.Event(ctx, rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if heldRan.Load() > 0 || ev.Attempts > 0 {
		t.Errorf("a delivery of target %q paused while a Go handler ran was delivered (%d attempts, status %s): the pool claimed with the pauses it read before its Go handlers ran",
			"held", ev.Attempts, ev.Status)
	}
}
