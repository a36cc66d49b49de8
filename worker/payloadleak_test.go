package worker_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// failingQueue is a real store whose first claims and first picks fail,
// as a database that goes away for a moment makes them.
type failingQueue struct {
	hookbox.Queue
	claims, picks atomic.Int64 // failures left
}

var errGoneAway = errors.New("the database went away (injected)")

func (q *failingQueue) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	if q.claims.Add(-1) >= 0 {
		return nil, errGoneAway
	}
	return q.Queue.Claim(ctx, p)
}

func (q *failingQueue) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	wt, err := q.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	return failingWorkTx{wt, q}, nil
}

type failingWorkTx struct {
	hookbox.WorkTx
	q *failingQueue
}

func (w failingWorkTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	if w.q.picks.Add(-1) >= 0 {
		return nil, time.Time{}, errGoneAway
	}
	return w.WorkTx.Pick(ctx, p)
}

// TestPayloadBudgetGivenBack: every payload byte a claim reserves or
// takes of MaxPayloadBytes is given back, whatever ends the work: a Go
// handler or a target that panics, a claim or a pick the store fails, a
// Stop while claims and work are under way. A byte kept for ever would
// shrink the budget until the pool claimed nothing more. Each payload is
// the whole budget, so each claim takes one event and every later one
// waits for it to be given back: all are worked, and the pool, idle,
// holds nothing, nor once stopped. Both databases.
func TestPayloadBudgetGivenBack(t *testing.T) {
	const size = 1 << 20
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &failingQueue{Queue: s}
		q.claims.Store(2)
		q.picks.Store(2)
		p := worker.New(q, worker.Options{PollInterval: 10 * time.Millisecond, MaxPayloadBytes: size, TxWorkers: 2})
		p.Handle("tx", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.DeliveryID == "boom" {
				panic("handler panics")
			}
			return nil
		})
		p.Route("fwd", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if ev.DeliveryID == "boom" {
				panic("target panics")
			}
			return nil
		}))
		for _, src := range []string{"tx", "fwd"} {
			p.SetPolicy(src, worker.Policy{MaxAttempts: 1})
		}
		var ds []hookbox.Delivery
		for _, src := range []string{"tx", "fwd"} {
			for _, id := range []string{"boom", "a", "b", "c", "d"} {
				d := storetest.Delivery(src, id)
				d.Payload = bytes.Repeat([]byte("x"), size)
				ds = append(ds, d)
			}
		}
		rs, err := storetest.IngestBySize(t, s, ds, 2<<20) // 10 MiB in all
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		for i, r := range rs {
			want := hookbox.StatusDone
			if ds[i].DeliveryID == "boom" {
				want = hookbox.StatusDead
			}
			waitStatus(t, s, p, r.ID, want)
		}
		// A failed pick sends the pool into recovery, which claims: the
		// second pick failure may never be met.
		if q.claims.Load() >= 2 || q.picks.Load() >= 2 {
			t.Fatalf("a failure of each kind was not met: %d claims, %d picks left to fail", q.claims.Load(), q.picks.Load())
		}
		held := func() int64 {
			deadline := time.Now().Add(10 * time.Second)
			for {
				n := worker.PayloadHeld(p)
				if n == 0 || time.Now().After(deadline) {
					return n
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if n := held(); n != 0 {
			t.Fatalf("the pool, idle with every event finished, holds %d payload bytes of its budget", n)
		}
		// A Stop while claims and work are under way gives back theirs.
		var more []hookbox.Delivery
		for _, id := range []string{"e", "f", "g", "h"} {
			for _, src := range []string{"tx", "fwd"} {
				d := storetest.Delivery(src, id)
				d.Payload = bytes.Repeat([]byte("y"), size)
				more = append(more, d)
			}
		}
		if _, err := storetest.IngestBySize(t, s, more, 2<<20); err != nil { // 8 MiB
			t.Fatal(err)
		}
		p.Notify()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		worker.Quiet(p)
		if n := worker.PayloadHeld(p); n != 0 {
			t.Fatalf("the pool, stopped, holds %d payload bytes of its budget", n)
		}
	})
}
