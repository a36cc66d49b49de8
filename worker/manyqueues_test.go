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
