package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// The tests here run hookbox on hosts whose clocks are off the PostgreSQL
// server's: pgtest.ClockURL moves the database's clock instead, which is
// the same for every time the host computes (the pool's and the store's
// time.Now alike).

// countingQueue is the real store, counting the claims that returned and
// the lease extensions that reached it.
type countingQueue struct {
	hookbox.Queue
	claims, extends atomic.Int32
}

func (q *countingQueue) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := q.Queue.Claim(ctx, p)
	q.claims.Add(1)
	return evs, err
}

func (q *countingQueue) ExtendLeases(ctx context.Context, owner string, ids []int64, until time.Time) error {
	err := q.Queue.ExtendLeases(ctx, owner, ids, until)
	if err == nil && len(ids) > 0 {
		q.extends.Add(1)
	}
	return err
}

// awaitCount waits until n reaches want, failing after 30 s.
func awaitCount(t *testing.T, what string, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after 30 s, want %d", what, n.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSkewedHostKeepsItsLease: two pools share PostgreSQL from hosts whose
// clocks are 90 s behind the server's (a lease lasts 12 s). Pool A claims a
// delivery and runs it; its lease extensions keep it, so pool B, claiming
// all along, never starts it while A runs it. Lease ends were written from
// the host's clock, 90 s in the server's past: A's first extension ended
// its lease, and B ran the delivery beside it.
func TestSkewedHostKeepsItsLease(t *testing.T) {
	s := dbtest.Open(t, pgtest.ClockURL(t, 90*time.Second))
	g := newGate("x")
	// A lease lasts 12 s, extended every 4 s; the attempt ends at 6 s, so
	// A's first extension comes while it runs.
	pol := worker.Policy{Timeout: 6 * time.Second}
	qa, qb := &countingQueue{Queue: s}, &countingQueue{Queue: s}
	a := worker.New(qa, worker.Options{Name: "hostA", PollInterval: 100 * time.Millisecond})
	a.Route("plain", g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
	a.SetPolicy("plain", pol)
	start(t, a)
	ingest(t, s, storetest.Delivery("plain", "x"))
	g.await(t, a, "x")
	b := worker.New(qb, worker.Options{Name: "hostB", PollInterval: 100 * time.Millisecond})
	b.Route("plain", g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
	b.SetPolicy("plain", pol)
	start(t, b)
	// An extension by A, then three claims by B after it.
	awaitCount(t, "A's lease extensions", &qa.extends, qa.extends.Load()+1)
	awaitCount(t, "B's claims", &qb.claims, qb.claims.Load()+3)
	close(g.release)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.overlaps) > 0 {
		t.Errorf("started while it ran at the other pool: %v (started %d times)", g.overlaps, g.runs["x"])
	}
}

// TestSkewedHostWaitsItsBackoff: a failed attempt waits its backoff by the
// database's clock, whatever the pool's host's reads. On a host an hour
// behind the server, a retry 10 s out was an hour in the server's past:
// every retry was due at once and the event used up its attempts in
// seconds. On a host 10 minutes ahead, a retry 100 ms out waited 10
// minutes.
func TestSkewedHostWaitsItsBackoff(t *testing.T) {
	t.Run("behind", func(t *testing.T) {
		t.Parallel()
		s := dbtest.Open(t, pgtest.ClockURL(t, time.Hour))
		var calls atomic.Int32
		q := &countingQueue{Queue: s}
		p := worker.New(q, worker.Options{Name: "slowclock", PollInterval: 50 * time.Millisecond})
		p.Route("plain", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			calls.Add(1)
			return errors.New("503")
		}))
		p.SetPolicy("plain", worker.Policy{MaxAttempts: 4, BackoffMin: 10 * time.Second, BackoffMax: time.Minute, Timeout: 2 * time.Second})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("plain", "burn"))[0].ID
		e := waitAttempts(t, s, p, id, 1)
		// Three claims after the failure was recorded: none takes it.
		awaitCount(t, "claims", &q.claims, q.claims.Load()+3)
		var wait float64
		if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT extract(epoch FROM next_attempt_at - now()) FROM queue WHERE id = $1`, id).Scan(&wait)
		}); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 1 || wait < 5 {
			t.Errorf("after a failure with a 10 s minimum backoff: %d attempts, the retry due in %.1f s by the database's clock (event %s, next attempt at %s)",
				n, wait, e.Status, e.NextAttemptAt.UTC().Format(time.RFC3339))
		}
	})
	t.Run("ahead", func(t *testing.T) {
		t.Parallel()
		s := dbtest.Open(t, pgtest.ClockURL(t, -10*time.Minute))
		var calls atomic.Int32
		p := worker.New(s, worker.Options{Name: "fastclock", PollInterval: 50 * time.Millisecond})
		p.Route("plain", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if calls.Add(1) == 1 {
				return errors.New("503 once")
			}
			return nil
		}))
		p.SetPolicy("plain", worker.Policy{BackoffMin: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Timeout: 2 * time.Second})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("plain", "r"))[0].ID
		waitStatus(t, s, p, id, hookbox.StatusDone)
	})
}

// waitAttempts waits until event id has had n attempts and is not being
// worked, failing after 20 s.
func waitAttempts(t *testing.T, s dbtest.Store, p *worker.Pool, id int64, n int) hookbox.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Attempts >= n && e.Status != hookbox.StatusProcessing {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d: %d attempts, %s after 20 s; want %d", id, e.Attempts, e.Status, n)
		}
		p.Notify()
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReleasedBySkewedHostDueAtOnce: a pool on a host 10 minutes ahead of
// the PostgreSQL server's clock is stopped while it runs a delivery; the
// attempt it gives back is due at once by the server's clock, and the
// other pool runs it. It was due 10 minutes later.
func TestReleasedBySkewedHostDueAtOnce(t *testing.T) {
	s := dbtest.Open(t, pgtest.ClockURL(t, -10*time.Minute))
	started := make(chan struct{}, 4)
	a := worker.New(s, worker.Options{Name: "stopping", PollInterval: 100 * time.Millisecond})
	a.Route("plain", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		started <- struct{}{}
		<-ctx.Done() // runs until shutdown cancels it
		return ctx.Err()
	}))
	a.SetPolicy("plain", worker.Policy{Timeout: 10 * time.Second})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := ingest(t, s, storetest.Delivery("plain", "rel"))[0].ID
	a.Notify()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first pool never started the delivery")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	a.Stop(ctx) // grace over: the delivery is cut short and released
	cancel()
	if e, err := s.Event(context.Background(), id); err != nil || e.Status != hookbox.StatusPending {
		t.Fatalf("after the stop: %+v, %v; want it given back, pending", e, err)
	}
	b := worker.New(s, worker.Options{Name: "running", PollInterval: 100 * time.Millisecond})
	b.Route("plain", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	start(t, b)
	waitStatus(t, s, b, id, hookbox.StatusDone)
}

// TestEventFromHostAheadDueAtOnce: an event received by a host whose clock
// is 10 minutes ahead of the PostgreSQL server's (its received_at is 10
// minutes in the server's future) is due at once, and so are its
// deliveries to targets; they were first due at received_at.
func TestEventFromHostAheadDueAtOnce(t *testing.T) {
	s := dbtest.Open(t, pgtest.ClockURL(t, -10*time.Minute))
	ctx := context.Background()
	ingest(t, s, storetest.Delivery("plain", "ahead"), storetest.Keyed("routed", "t", "ahead", ""))
	for _, src := range []string{"plain", hookbox.QueueName("routed", "t")} {
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o-" + src, Limit: 10, Lease: time.Minute, Sources: []string{src}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			all, _ := s.Events(ctx, hookbox.Filter{Source: src})
			t.Errorf("a claim of %s right after the ingest took %d events, want 1 (stored: %+v)", src, len(evs), all)
		}
	}
}
