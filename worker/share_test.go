package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// hanging is a target that never answers: each delivery holds its slot
// until the attempt's timeout (or, when release is not nil, until the
// test closes it). It counts the deliveries started.
type hanging struct {
	started atomic.Int64
	release chan struct{}
}

func (h *hanging) Deliver(ctx context.Context, ev *hookbox.Event) error {
	h.started.Add(1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return fmt.Errorf("released")
	}
}

// TestHangingSourceLeavesSlots: a source whose target never answers, with
// a backlog due before anything else, holds at most its share of the
// slots; a healthy source's event, due later, runs at once, while every
// delivery of the hanging one is still stuck. Without the share, the
// hanging source's older events fill every slot, and the healthy one
// waits for as long as they hang.
func TestHangingSourceLeavesSlots(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var ds []hookbox.Delivery
		for i := range 40 {
			ds = append(ds, storetest.Delivery("slow", fmt.Sprint("s", i)))
		}
		ingest(t, s, ds...)
		rs := ingest(t, s, storetest.Delivery("fast", "f1"), storetest.Delivery("ctl", "c1"))
		p := worker.New(s, worker.Options{Concurrency: 6, PollInterval: 10 * time.Millisecond})
		slow := &hanging{release: make(chan struct{})}
		defer close(slow.release) // before the pool stops (deferred after start's cleanup)
		p.SetPolicy("slow", worker.Policy{Timeout: time.Hour, MaxAttempts: 3})
		p.Route("slow", slow)
		p.Route("fast", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
		// A route with Controls takes part in the share as well.
		p.Route("ctl", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
		p.SetControls("ctl", worker.Controls{MaxConcurrency: 10})
		start(t, p)
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
		}
		if n := slow.started.Load(); n > 6 {
			t.Errorf("%d deliveries of the hanging source started with 6 slots", n)
		}
	})
}

// TestHangingSourceYieldsFreedSlots: the healthy source's event arrives
// after the hanging source took every slot. Each slot that frees (an
// attempt timing out) goes first to a queue under its share, so the
// healthy event runs at the first one, not after the whole backlog has
// had its turn: counted in attempts of the hanging source, a few against
// the backlog's 40.
func TestHangingSourceYieldsFreedSlots(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	var ds []hookbox.Delivery
	for i := range 40 {
		ds = append(ds, storetest.Delivery("slow", fmt.Sprint("s", i)))
	}
	ingest(t, s, ds...)
	p := worker.New(s, worker.Options{Concurrency: 4, PollInterval: 10 * time.Millisecond})
	slow := &hanging{}
	p.SetPolicy("slow", worker.Policy{Timeout: 200 * time.Millisecond, MaxAttempts: 3, BackoffMin: time.Hour, BackoffMax: time.Hour})
	p.Route("slow", slow)
	p.Route("fast", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	start(t, p)
	for slow.started.Load() < 4 {
		time.Sleep(time.Millisecond) // every slot is held
	}
	rs := ingest(t, s, storetest.Delivery("fast", "f1"))
	p.Notify()
	waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
	// The first wave (4), then at most a share (2) of the next, claimed
	// in the round the healthy event got its slot.
	if n := slow.started.Load(); n > 8 {
		t.Errorf("the healthy event waited for %d deliveries of the hanging source", n)
	}
}
