package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// claimLog is a store that records the queues of every claim and counts
// the rounds that asked which queues have events due.
type claimLog struct {
	hookbox.Queue
	mu     sync.Mutex
	claims [][]string
	probes atomic.Int64
}

func (q *claimLog) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	q.mu.Lock()
	q.claims = append(q.claims, slices.Clone(p.Sources))
	q.mu.Unlock()
	return q.Queue.Claim(ctx, p)
}

func (q *claimLog) DueQueues(ctx context.Context) ([]string, error) {
	defer q.probes.Add(1)
	return q.Queue.DueQueues(ctx)
}

// claimed returns the queues claimed so far, each once, and forgets them.
func (q *claimLog) claimed() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, c := range q.claims {
		for _, s := range c {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	q.claims = nil
	slices.Sort(out)
	return out
}

// awaitProbes waits until the pool has asked n more times which queues
// have events due.
func (q *claimLog) awaitProbes(t *testing.T, n int64) {
	t.Helper()
	want := q.probes.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for q.probes.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the pool asked %d times which queues have events due, want %d", q.probes.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idleTargets routes n targets of source o (o/t0 … o/tn-1), each with a
// circuit (as serve gives every named target) and every third strict, to
// g.
func idleTargets(p *worker.Pool, g *gate, n int) {
	for i := range n {
		name := fmt.Sprintf("o/t%d", i)
		p.SetPolicy(name, worker.Policy{Timeout: time.Second, Strict: i%3 == 0})
		p.Route(name, g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
		p.SetControls(name, worker.Controls{CircuitAfter: 5, CircuitCooldown: time.Minute})
	}
}

// TestIdleTargetsCostNoClaims: a pool with many targets and nothing due
// makes no claim, only one read per round, and an event that comes due is
// claimed for its own queue alone. Every round used to make a claim (a
// write transaction) per target: 774 a second at 1,000 targets on
// PostgreSQL with nothing stored.
func TestIdleTargetsCostNoClaims(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &claimLog{Queue: s}
		g := newGate()
		p := worker.New(q, worker.Options{PollInterval: 10 * time.Millisecond})
		idleTargets(p, g, 30)
		start(t, p)
		q.awaitProbes(t, 5)
		if got := q.claimed(); len(got) > 0 {
			t.Fatalf("with nothing stored the pool claimed %v", got)
		}
		// One event for o/t4 and one for the strict o/t6: each is claimed
		// for its own queue, and no other queue is.
		ingest(t, s, storetest.Keyed("o", "t4", "a", ""), storetest.Keyed("o", "t6", "b", ""))
		waitAllDone(t, s, p, "o/t4", 1)
		waitAllDone(t, s, p, "o/t6", 1)
		q.awaitProbes(t, 3)
		if got := q.claimed(); !slices.Equal(got, []string{"o/t4", "o/t6"}) {
			t.Errorf("claimed queues %v, want [o/t4 o/t6]", got)
		}
		g.check(t)
	})
}

// TestBusyTargetAmongIdle: a backlog on one target beside many idle ones
// drains with claims of that target only.
func TestBusyTargetAmongIdle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &claimLog{Queue: s}
		g := newGate()
		p := worker.New(q, worker.Options{PollInterval: 10 * time.Millisecond})
		idleTargets(p, g, 30)
		var ds []hookbox.Delivery
		for i := range 90 {
			ds = append(ds, storetest.Keyed("o", "t7", fmt.Sprint("busy-", i), ""))
		}
		ingest(t, s, ds...)
		start(t, p)
		waitAllDone(t, s, p, "o/t7", 90)
		if got := q.claimed(); !slices.Equal(got, []string{"o/t7"}) {
			t.Errorf("claimed queues %v, want [o/t7]", got)
		}
		g.check(t)
	})
}

// TestCircuitTrialAmongIdle: a circuit opened by a failure whose retry
// comes due during its cooldown sends its trial when the cooldown ends,
// with the pool polling once an hour. The round that followed the failure
// found nothing due (the retry came due later) and left the queue out, so
// nothing read how long the circuit had left: the trial waited for the
// next poll.
func TestCircuitTrialAmongIdle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &claimLog{Queue: s}
		p := worker.New(q, worker.Options{PollInterval: time.Hour})
		idleTargets(p, newGate(), 3)
		var attempts atomic.Int32
		tried := make(chan struct{})
		p.SetPolicy("o/x", worker.Policy{Timeout: time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
		p.Route("o/x", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if attempts.Add(1) == 1 {
				return errors.New("down")
			}
			close(tried)
			return nil
		}))
		p.SetControls("o/x", worker.Controls{CircuitAfter: 1, CircuitCooldown: 300 * time.Millisecond})
		start(t, p)
		ingest(t, s, storetest.Keyed("o", "x", "1", ""))
		p.Notify()
		select {
		case <-tried:
		case <-time.After(20 * time.Second):
			t.Fatalf("no trial 20 s after the failure (cooldown 300 ms, retry due after 50 ms): %d attempts", attempts.Load())
		}
	})
}
