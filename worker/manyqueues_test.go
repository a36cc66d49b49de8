package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// claimCounter is a store that counts its claims (each one transaction),
// the most queues one of them took events of, and the rounds of the
// claiming loop (each reads the queues with events due first).
type claimCounter struct {
	hookbox.Queue
	claims, rounds atomic.Int64
	mu             sync.Mutex
	widest         int
}

func (q *claimCounter) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := q.Queue.Claim(ctx, p)
	q.claims.Add(1)
	queues := map[string]bool{}
	for _, e := range evs {
		queues[e.Source] = true
	}
	q.mu.Lock()
	q.widest = max(q.widest, len(queues))
	q.mu.Unlock()
	return evs, err
}

func (q *claimCounter) DueQueues(ctx context.Context) ([]string, error) {
	q.rounds.Add(1)
	return q.Queue.DueQueues(ctx)
}

// deliveryCounter is a target that answers at once and counts the
// deliveries of each event.
type deliveryCounter struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (d *deliveryCounter) Deliver(ctx context.Context, ev *hookbox.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs[ev.ID]++
	return nil
}

func (d *deliveryCounter) count() (events, deliveries int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.runs {
		events, deliveries = events+1, deliveries+n
	}
	return events, deliveries
}

// manyQueues routes n queues, each with Controls (as hookbox serve gives
// every target), to target, and stores per events of each; it returns
// the receipts.
func manyQueues(t *testing.T, s dbtest.Store, p *worker.Pool, n, per int, c worker.Controls, target worker.Target) []hookbox.Receipt {
	t.Helper()
	var ds []hookbox.Delivery
	for i := range n {
		q := fmt.Sprint("mq-", i)
		p.Route(q, target)
		p.SetControls(q, c)
		for j := range per {
			ds = append(ds, storetest.Delivery(q, fmt.Sprint(j)))
		}
	}
	return ingest(t, s, ds...)
}

// TestManyQueuesClaimedTogether: 200 queues with two events due each, to
// a target that answers at once, and 32 slots: a share of one slot each.
// A round claims the queues the free slots reach in one claim, each up to
// its share, not one claim (one transaction, on PostgreSQL one commit)
// per queue: fewer claims than queues, and one of them took events of
// several queues. Every event is delivered once and done. Before, each
// queue under its share was claimed on its own, one after another, and so
// were the routes with Controls given what slots were left: a claim took
// events of one queue, at least 200 claims for the 400 events, and on
// PostgreSQL the drain of 1,800 deliveries over 600 queues ran at about
// one commit per delivery.
func TestManyQueuesClaimedTogether(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const queues, per = 200, 2
		s := dbtest.Open(t, dbURL)
		q := &claimCounter{Queue: s}
		p := worker.New(q, worker.Options{Concurrency: 32, PollInterval: 10 * time.Millisecond})
		target := &deliveryCounter{runs: map[int64]int{}}
		rs := manyQueues(t, s, p, queues, per, worker.Controls{CircuitAfter: 5, CircuitCooldown: 10 * time.Second}, target)
		start(t, p)
		for _, r := range rs {
			waitStatusWithin(t, s, p, r.ID, hookbox.StatusDone, time.Minute)
		}
		events, deliveries := target.count()
		q.mu.Lock()
		widest := q.widest
		q.mu.Unlock()
		t.Logf("%d claims for %d events over %d queues, the widest over %d queues", q.claims.Load(), len(rs), queues, widest)
		if events != len(rs) || deliveries != len(rs) {
			t.Errorf("%d deliveries of %d events, want each of the %d delivered once", deliveries, events, len(rs))
		}
		if widest < 2 {
			t.Errorf("no claim took events of more than %d queue", widest)
		}
		if n := q.claims.Load(); n >= queues {
			t.Errorf("%d claims for %d queues, want fewer claims than queues", n, queues)
		}
	})
}

// TestManyQueuesRateInOneClaim: routes claimed together each take what
// their rate allows, and the claim spends their tokens, no more and no
// fewer: 40 routes of a rate of one event per 1,000 s (a burst of one)
// and three events each deliver one event each, and nothing more however
// many rounds go by.
func TestManyQueuesRateInOneClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const queues, per = 40, 3
		s := dbtest.Open(t, dbURL)
		q := &claimCounter{Queue: s}
		p := worker.New(q, worker.Options{Concurrency: 32, PollInterval: 10 * time.Millisecond})
		target := &deliveryCounter{runs: map[int64]int{}}
		manyQueues(t, s, p, queues, per, worker.Controls{Rate: 0.001}, target)
		start(t, p)
		byQueue := func() map[string]int {
			done, err := s.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusDone, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]int{}
			for _, e := range done {
				m[e.Source]++
			}
			return m
		}
		for deadline := time.Now().Add(time.Minute); len(byQueue()) < queues; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d routes have an event done after a minute, want %d", len(byQueue()), queues)
			}
		}
		// Ten more rounds of the claiming loop.
		for r := q.rounds.Load() + 10; q.rounds.Load() < r; time.Sleep(5 * time.Millisecond) {
			p.Notify()
		}
		if events, deliveries := target.count(); events != queues || deliveries != queues {
			t.Errorf("%d deliveries of %d events, want one of each route's, %d", deliveries, events, queues)
		}
		for name, n := range byQueue() {
			if n != 1 {
				t.Errorf("route %s has %d events done, want 1 (its rate allows one)", name, n)
			}
		}
	})
}

// TestDrainReadsDueQueuesOnce: a drain of 200 queues, three events each,
// over 16 slots to a target that answers at once, with the pool polling
// once an hour, asks the store which queues have events due once or
// twice, not once a round: between the rounds nothing is stored and
// nothing comes due (every event ends done), so the first answer, less
// the queues a claim emptied, stays true. Every event is still
// delivered once: a queue dropped from the answer while it had events due
// would wait for the hour's poll. Each round used to ask again, one seek
// per queue with unfinished events: on PostgreSQL at 2,000 queues, 233
// reads of 65 ms in a drain of 27 s.
func TestDrainReadsDueQueuesOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const queues, per = 200, 3
		s := dbtest.Open(t, dbURL)
		q := &claimCounter{Queue: s}
		p := worker.New(q, worker.Options{Concurrency: 16, PollInterval: time.Hour})
		target := &deliveryCounter{runs: map[int64]int{}}
		rs := manyQueues(t, s, p, queues, per, worker.Controls{CircuitAfter: 5, CircuitCooldown: 10 * time.Second}, target)
		start(t, p)
		// Awaited without Notify (waitStatus wakes the pool as ingest
		// does): nothing but the drain itself wakes it.
		for _, r := range rs {
			awaitDone(t, s, r.ID, time.Minute)
		}
		t.Logf("%d claims, %d reads of the queues with events due", q.claims.Load(), q.rounds.Load())
		if events, deliveries := target.count(); events != len(rs) || deliveries != len(rs) {
			t.Errorf("%d deliveries of %d events, want each of the %d delivered once", deliveries, events, len(rs))
		}
		if n := q.rounds.Load(); n > 2 {
			t.Errorf("the drain read the queues with events due %d times over %d claims, want at most 2", n, q.claims.Load())
		}
	})
}

// awaitDone waits until event id is done, failing after limit, without
// waking the pool.
func awaitDone(t *testing.T, s dbtest.Store, id int64, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s after %v, want done", id, e.Status, limit)
		}
	}
}

// TestEventStoredDuringDrainClaimed: an event stored in an idle queue
// while the pool drains others, and announced as ingest does (Notify), is
// claimed at once, with the pool polling once an hour: the answer of
// which queues have events due that the drain's rounds reuse did not
// list its queue, and Notify makes the next round read it again.
func TestEventStoredDuringDrainClaimed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const queues, per = 50, 4
		s := dbtest.Open(t, dbURL)
		q := &claimCounter{Queue: s}
		p := worker.New(q, worker.Options{Concurrency: 4, PollInterval: time.Hour})
		release := make(chan struct{})
		var once sync.Once
		slow := worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		manyQueues(t, s, p, queues, per, worker.Controls{CircuitAfter: 5, CircuitCooldown: 10 * time.Second}, slow)
		late := &deliveryCounter{runs: map[int64]int{}}
		p.Route("late", late)
		p.SetControls("late", worker.Controls{CircuitAfter: 5, CircuitCooldown: 10 * time.Second})
		start(t, p)
		defer once.Do(func() { close(release) })
		// The drain's first round has read which queues are due, and
		// claimed.
		for deadline := time.Now().Add(20 * time.Second); q.claims.Load() == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the pool never claimed")
			}
		}
		rs := ingest(t, s, storetest.Delivery("late", "1"))
		p.Notify()
		// Let the drain go on: its rounds follow freed slots.
		once.Do(func() { close(release) })
		awaitDone(t, s, rs[0].ID, 20*time.Second)
		if events, deliveries := late.count(); events != 1 || deliveries != 1 {
			t.Errorf("%d deliveries of %d events of the late queue, want 1 of 1", deliveries, events)
		}
	})
}
