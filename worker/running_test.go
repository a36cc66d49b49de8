package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// endLeases ends, by hand, the lease of every event being worked, as if
// their extensions had not reached the database in time.
func endLeases(t *testing.T, s dbtest.Store, dbURL string) {
	t.Helper()
	q := `UPDATE queue SET next_attempt_at = now() - interval '1 hour' WHERE status = 'processing'`
	if strings.HasPrefix(dbURL, "sqlite:") {
		q = `UPDATE events SET next_attempt_at = 0 WHERE status = 'processing'`
	}
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, q)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// gate is a target that records who ran, holds the deliveries named in
// hold until released, and notes a delivery that starts while another of
// its group (order key, or source) runs.
type gate struct {
	mu       sync.Mutex
	runs     map[string]int // delivery id → times started
	running  map[string]int // group → deliveries running
	overlaps []string
	started  map[string]chan struct{}
	release  chan struct{}
	hold     map[string]bool
}

func newGate(hold ...string) *gate {
	g := &gate{runs: map[string]int{}, running: map[string]int{}, started: map[string]chan struct{}{},
		release: make(chan struct{}), hold: map[string]bool{}}
	for _, id := range hold {
		g.hold[id] = true
	}
	return g
}

// startedCh is closed when delivery id first starts.
func (g *gate) startedCh(id string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started[id] == nil {
		g.started[id] = make(chan struct{})
	}
	return g.started[id]
}

func (g *gate) target(group func(*hookbox.Event) string) worker.Target {
	return worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		key := group(ev)
		ch := g.startedCh(ev.DeliveryID)
		g.mu.Lock()
		g.runs[ev.DeliveryID]++
		if g.running[key]++; g.running[key] > 1 {
			g.overlaps = append(g.overlaps, ev.DeliveryID)
		}
		if g.runs[ev.DeliveryID] == 1 {
			close(ch)
		}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.running[key]--
			g.mu.Unlock()
		}()
		if g.hold[ev.DeliveryID] {
			select {
			case <-g.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// await waits for delivery id to start, failing after 20 s.
func (g *gate) await(t *testing.T, p *worker.Pool, id string) {
	t.Helper()
	p.Notify()
	select {
	case <-g.startedCh(id):
	case <-time.After(20 * time.Second):
		t.Fatalf("delivery %s did not start within 20 s", id)
	}
}

// waitAllDone waits until the n events of queue are done.
func waitAllDone(t *testing.T, s dbtest.Store, p *worker.Pool, queue string, n int) {
	t.Helper()
	evs, err := s.Events(context.Background(), hookbox.Filter{Source: queue})
	if err != nil || len(evs) != n {
		t.Fatalf("events of %s: %d, %v; want %d", queue, len(evs), err, n)
	}
	for _, e := range evs {
		waitStatus(t, s, p, e.ID, hookbox.StatusDone)
	}
}

// check fails t if a delivery started twice or beside another of its
// group.
func (g *gate) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, n := range g.runs {
		if n != 1 {
			t.Errorf("delivery %s started %d times, want once", id, n)
		}
	}
	if len(g.overlaps) > 0 {
		t.Errorf("started while another of their group ran: %v", g.overlaps)
	}
}

// TestRunningKeyStaysBusy: a pool never starts a delivery of an order
// key it is running one of, even when the running one's lease has ended
// (its extensions could not reach the database in time): the store alone
// would hand the running delivery out again. A delivery of another key,
// started after the leases ended, shows that a claim by key ran then.
func TestRunningKeyStaysBusy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		g := newGate("first")
		p := worker.New(s, worker.Options{PollInterval: time.Hour})
		p.Route("o/app", g.target(func(ev *hookbox.Event) string { return ev.OrderKey }))
		p.SetControls("o/app", worker.Controls{ByKey: true})
		start(t, p)
		ingest(t, s, keyed("first", "k1"), keyed("second", "k1"))
		g.await(t, p, "first")
		endLeases(t, s, dbURL)
		ingest(t, s, keyed("other", "k2"))
		g.await(t, p, "other")
		close(g.release)
		g.await(t, p, "second")
		waitAllDone(t, s, p, "o/app", 3)
		g.check(t)
	})
}

// TestRunningStrictStaysBusy: the same for a strict source, whose one
// event runs alone. Deliveries of a plain source in the same pool show
// that claim rounds went by after the lease ended: the second one is
// claimed in a round that began after the first was delivered, which
// began after the lease ended.
func TestRunningStrictStaysBusy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		g := newGate("first")
		p := worker.New(s, worker.Options{PollInterval: time.Hour})
		p.Route("strict", g.target(func(ev *hookbox.Event) string { return ev.Source }))
		p.SetPolicy("strict", worker.Policy{Strict: true})
		p.Route("plain", g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
		start(t, p)
		ingest(t, s, storetest.Delivery("strict", "first"), storetest.Delivery("strict", "second"))
		g.await(t, p, "first")
		endLeases(t, s, dbURL)
		ingest(t, s, storetest.Delivery("plain", "p1"))
		g.await(t, p, "p1")
		ingest(t, s, storetest.Delivery("plain", "p2"))
		g.await(t, p, "p2")
		close(g.release)
		g.await(t, p, "second")
		waitAllDone(t, s, p, "strict", 2)
		g.check(t)
	})
}

// TestRunningEventStaysOne: the same for a plain target: a pool never
// starts an event it is running again beside itself, whatever its lease
// says. A delivery of the same source, started after the leases ended,
// shows that a claim ran then.
func TestRunningEventStaysOne(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		g := newGate("first")
		p := worker.New(s, worker.Options{PollInterval: time.Hour})
		p.Route("plain", g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
		start(t, p)
		ingest(t, s, storetest.Delivery("plain", "first"))
		g.await(t, p, "first")
		endLeases(t, s, dbURL)
		ingest(t, s, storetest.Delivery("plain", "other"))
		g.await(t, p, "other")
		close(g.release)
		waitAllDone(t, s, p, "plain", 2)
		g.check(t)
	})
}

// TestStrictWaitsForASlot: while slow deliveries hold every slot, a strict
// source's event is not claimed into a wait for one, which would hold the
// claim loop and with it the Go handlers it runs: events of an apply-only
// handler ingested after it are done while the slow ones still run, and
// the strict one runs once a slot frees.
func TestStrictWaitsForASlot(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		g := newGate("s1", "s2")
		p := worker.New(s, worker.Options{Concurrency: 2, PollInterval: 10 * time.Millisecond})
		p.Route("slow", g.target(func(ev *hookbox.Event) string { return ev.DeliveryID }))
		p.Route("strict", g.target(func(ev *hookbox.Event) string { return ev.Source }))
		p.SetPolicy("strict", worker.Policy{Strict: true})
		p.Handle("go", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, p)
		ingest(t, s, storetest.Delivery("slow", "s1"), storetest.Delivery("slow", "s2"))
		g.await(t, p, "s1")
		g.await(t, p, "s2")
		ingest(t, s, storetest.Delivery("strict", "st"))
		// The claim loop works h1 before it reaches the strict source in the
		// same round, or in a later one: once h1 is done, a loop held by
		// the strict event would never come to h2.
		h1 := ingest(t, s, storetest.Delivery("go", "h1"))[0].ID
		waitStatus(t, s, p, h1, hookbox.StatusDone)
		h2 := ingest(t, s, storetest.Delivery("go", "h2"))[0].ID
		waitStatus(t, s, p, h2, hookbox.StatusDone)
		close(g.release)
		g.await(t, p, "st")
		waitAllDone(t, s, p, "strict", 1)
		waitAllDone(t, s, p, "slow", 2)
		g.check(t)
	})
}

// keyed is a delivery to source o routed to its target app under order
// key key.
func keyed(id, key string) hookbox.Delivery { return storetest.Keyed("o", "app", id, key) }

// claimFailsAfterCommit is a store whose first claim that leases events
// returns them with an error, as a by-key claim does when a step after its
// commit fails (its second transaction, the key cursor's read, a deadline
// passing there).
type claimFailsAfterCommit struct {
	hookbox.Queue
	failed atomic.Bool
}

func (q *claimFailsAfterCommit) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := q.Queue.Claim(ctx, p)
	if err == nil && len(evs) > 0 && !q.failed.Swap(true) {
		return evs, errors.New("key cursor: context deadline exceeded (injected)")
	}
	return evs, err
}

// TestClaimedWithAnErrorIsWorked: events a claim returns together with an
// error are leased all the same, and the pool works them at once: each is
// delivered once, on its first attempt. Dropping them left them leased to
// nobody until their leases ended, and charged a second attempt.
func TestClaimedWithAnErrorIsWorked(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		g := newGate()
		p := worker.New(&claimFailsAfterCommit{Queue: s}, worker.Options{PollInterval: 50 * time.Millisecond})
		p.SetPolicy("o/app", worker.Policy{Timeout: time.Second})
		p.Route("o/app", g.target(func(ev *hookbox.Event) string { return ev.OrderKey }))
		p.SetControls("o/app", worker.Controls{ByKey: true})
		ingest(t, s, keyed("a", "k1"), keyed("b", "k2"), keyed("c", "k3"))
		start(t, p)
		waitAllDone(t, s, p, "o/app", 3)
		evs, err := s.Events(context.Background(), hookbox.Filter{Source: "o/app"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Attempts != 1 {
				t.Errorf("event %d (%s) took %d attempts, want 1", e.ID, e.OrderKey, e.Attempts)
			}
		}
		g.check(t)
	})
}

// TestOverrunningHandlerWithStoreTimeout: StoreTimeout bounds the pool's
// own calls, never a transaction of Go handlers: a handler that ignores its
// context and runs past its timeout (and past StoreTimeout) ends as it
// did without the bound (its success kept, on its first attempt), and an
// event beside it is done. Bounding the whole transaction failed every
// statement after the handler, charged nothing, and claimed the same batch
// again, forever.
func TestOverrunningHandlerWithStoreTimeout(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 20 * time.Millisecond, StoreTimeout: 300 * time.Millisecond})
		p.Handle("shop", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.DeliveryID == "slow" {
				time.Sleep(time.Second) // ignores ctx
			}
			return nil
		})
		p.SetPolicy("shop", worker.Policy{MaxAttempts: 2, Timeout: 200 * time.Millisecond})
		rs := ingest(t, s, storetest.Delivery("shop", "slow"), storetest.Delivery("shop", "fast"))
		start(t, p)
		for _, r := range rs {
			if e := waitStatus(t, s, p, r.ID, hookbox.StatusDone); e.Attempts != 1 {
				t.Errorf("event %s done after %d attempts, want 1", e.DeliveryID, e.Attempts)
			}
		}
	})
}
