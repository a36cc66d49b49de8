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

// hangingBacklog stores n deliveries of the source "slow" and routes it
// to a hanging target whose attempts end after timeout (and, when release
// is not nil, when the test closes it), never retried within a test.
func hangingBacklog(t *testing.T, s dbtest.Store, p *worker.Pool, n int, timeout time.Duration, release chan struct{}) *hanging {
	t.Helper()
	var ds []hookbox.Delivery
	for i := range n {
		ds = append(ds, storetest.Delivery("slow", fmt.Sprint("s", i)))
	}
	ingest(t, s, ds...)
	slow := &hanging{release: release}
	p.SetPolicy("slow", worker.Policy{Timeout: timeout, MaxAttempts: 3, BackoffMin: time.Hour, BackoffMax: time.Hour})
	p.Route("slow", slow)
	return slow
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
		p := worker.New(s, worker.Options{Concurrency: 6, PollInterval: 10 * time.Millisecond})
		slow := hangingBacklog(t, s, p, 40, time.Hour, make(chan struct{}))
		defer close(slow.release) // before the pool stops (deferred after start's cleanup)
		rs := ingest(t, s, storetest.Delivery("fast", "f1"), storetest.Delivery("ctl", "c1"))
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

// TestHangingSourceYieldsFreedSlots: the healthy source's events arrive
// after the hanging source took every slot it may (3 of 4) and the
// healthy source's first event, held by its target, the fourth. Each slot
// that frees (an attempt timing out) goes first to a queue under its
// share, so the healthy source's second event runs at the first one, not
// after the whole backlog has had its turn: counted in attempts of the
// hanging source, a few against the backlog's 40.
func TestHangingSourceYieldsFreedSlots(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	p := worker.New(s, worker.Options{Concurrency: 4, PollInterval: 10 * time.Millisecond})
	slow := hangingBacklog(t, s, p, 40, 200*time.Millisecond, nil)
	held, release := make(chan struct{}), make(chan struct{})
	p.Route("fast", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		if ev.DeliveryID == "f1" {
			close(held)
			<-release
		}
		return nil
	}))
	start(t, p)
	defer close(release) // before the pool stops (deferred after start's cleanup)
	for deadline := time.Now().Add(20 * time.Second); slow.started.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries of the hanging source started after 20 s, want 3 (every slot it may hold)", slow.started.Load())
		}
	}
	ingest(t, s, storetest.Delivery("fast", "f1"))
	p.Notify()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the healthy source's first event did not start on the slot no queue may fill alone")
	}
	base := slow.started.Load()
	rs := ingest(t, s, storetest.Delivery("fast", "f2"))
	p.Notify()
	waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
	// The wave running when f2 came (3), then at most a share (2) of the
	// next, claimed in the round the healthy event got its slot.
	if n := slow.started.Load() - base; n > 5 {
		t.Errorf("the healthy event waited for %d deliveries of the hanging source", n)
	}
}

// TestAnotherQueueStartsBesideAHangingOne: queues whose targets hang,
// alone with events due, hold all but one of 8 slots; another queue's
// event, stored later, starts at once on the one left. Before, they took
// every slot the idle queue left, and the other's event waited for one
// of them to free: the hanging attempts' timeout (an hour here). The
// hanging queue is a plain source, a route with Controls (claimed apart
// from the plain ones), or two plain sources sharing the slots.
func TestAnotherQueueStartsBesideAHangingOne(t *testing.T) {
	for _, c := range []struct {
		name      string
		ctl, pair bool
	}{{"plain", false, false}, {"controls", true, false}, {"two", false, true}} {
		t.Run(c.name, func(t *testing.T) { anotherQueueBesideHanging(t, c.ctl, c.pair) })
	}
}

func anotherQueueBesideHanging(t *testing.T, ctl, pair bool) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{Concurrency: 8, PollInterval: time.Hour})
		slow := hangingBacklog(t, s, p, 20, time.Hour, make(chan struct{}))
		defer close(slow.release) // before the pool stops (deferred after start's cleanup)
		if ctl {
			p.SetControls("slow", worker.Controls{MaxConcurrency: 100})
		}
		if pair {
			var ds []hookbox.Delivery
			for i := range 20 {
				ds = append(ds, storetest.Delivery("slow2", fmt.Sprint("t", i)))
			}
			ingest(t, s, ds...)
			p.Route("slow2", slow) // the same target: started counts both
		}
		p.Route("fast", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
		start(t, p)
		for deadline := time.Now().Add(20 * time.Second); slow.started.Load() < 7; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d deliveries of the hanging queues started after 20 s, want 7", slow.started.Load())
			}
		}
		rs := ingest(t, s, storetest.Delivery("fast", "f1"))
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		if n := slow.started.Load(); n != 7 {
			t.Errorf("%d deliveries of the hanging queues started, want 7 of 8 slots", n)
		}
	})
}

// waitDoneQuiet waits up to d for event id to be done, without waking
// the pool (waitStatus's Notify would make claims the test counts). The
// tests give it 20 s, not the moment the event should take: an event
// kept waiting behind a backlog shows in the backlog's deliveries
// started before it, whatever the machine's speed.
func waitDoneQuiet(t *testing.T, s dbtest.Store, id int64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDone {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// TestFewerSlotsThanQueues: two sources whose targets hang, each with a
// backlog, and a healthy one share two slots (a share of one each). As
// slots free, the queues under their share are claimed one by one, the
// fewest running first and in turn, so the healthy event gets the first
// turn that comes, rather than the hanging backlogs, older, winning every
// claim. The claim delay is long, so that the outcomes of the hanging
// attempts are recorded before the claim that follows them (a queue then
// holds neither slot nor lease); with plain sources and with Controls.
// With a claim delay of 100 ms, twice the poll interval, the rounds of
// the claim loop between two freed slots kept one rhythm, and the rotation
// that was to give each queue its turn came back to the same order every
// time: the healthy event waited for all 30 hanging deliveries, in most
// runs. Turns now follow which queue was served last.
func TestFewerSlotsThanQueues(t *testing.T) {
	for _, c := range []struct {
		ctl   bool
		delay time.Duration
	}{{false, 20 * time.Millisecond}, {true, 20 * time.Millisecond}, {false, 100 * time.Millisecond}, {true, 100 * time.Millisecond}} {
		ctl := c.ctl
		t.Run(fmt.Sprint("controls=", ctl, ",delay=", c.delay), func(t *testing.T) {
			s := dbtest.Open(t, dbtest.SQLiteURL(t))
			var ds []hookbox.Delivery
			for i := range 15 {
				ds = append(ds, storetest.Delivery("h1", fmt.Sprint("a", i)), storetest.Delivery("h2", fmt.Sprint("b", i)))
			}
			ingest(t, s, ds...)
			p := worker.New(s, worker.Options{Concurrency: 2, PollInterval: 50 * time.Millisecond, ClaimDelay: c.delay})
			h1, h2 := &hanging{}, &hanging{}
			pol := worker.Policy{Timeout: 150 * time.Millisecond, MaxAttempts: 3, BackoffMin: time.Hour, BackoffMax: time.Hour}
			p.SetPolicy("h1", pol)
			p.SetPolicy("h2", pol)
			p.Route("h1", h1)
			p.Route("h2", h2)
			p.Route("fast", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
			if ctl {
				for _, n := range []string{"h1", "h2", "fast"} {
					p.SetControls(n, worker.Controls{MaxConcurrency: 10})
				}
			}
			start(t, p)
			// The healthy event comes once the hanging queues' second
			// deliveries run: the loop has then claimed for slots freed
			// already, in whatever rhythm it keeps.
			for deadline := time.Now().Add(20 * time.Second); h1.started.Load()+h2.started.Load() < 4; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d hanging deliveries started after 20 s, want 4 (both slots held, twice)", h1.started.Load()+h2.started.Load())
				}
			}
			rs := ingest(t, s, storetest.Delivery("fast", "f1"))
			p.Notify()
			ok := waitDoneQuiet(t, s, rs[0].ID, 20*time.Second)
			t.Logf("fast done=%v; hanging deliveries started: h1 %d, h2 %d", ok, h1.started.Load(), h2.started.Load())
			if n := h1.started.Load() + h2.started.Load(); !ok || n > 8 {
				t.Errorf("healthy event waited for %d hanging deliveries (done %v)", n, ok)
			}
		})
	}
}

// TestStrictBesideHanging: a strict source's event, beside a plain source
// whose target hangs with a backlog, takes the first slot that frees:
// strict sources are claimed before the slots left over go to whoever
// has events due.
func TestStrictBesideHanging(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	p := worker.New(s, worker.Options{Concurrency: 4, PollInterval: 50 * time.Millisecond})
	slow := hangingBacklog(t, s, p, 40, 150*time.Millisecond, nil)
	p.Route("strict", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	p.SetPolicy("strict", worker.Policy{Strict: true, Timeout: time.Second, MaxAttempts: 3})
	start(t, p)
	for deadline := time.Now().Add(20 * time.Second); slow.started.Load() < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries of the hanging source started after 20 s, want 4 (every slot held)", slow.started.Load())
		}
	}
	rs := ingest(t, s, storetest.Delivery("strict", "x"))
	p.Notify()
	ok := waitDoneQuiet(t, s, rs[0].ID, 20*time.Second)
	t.Logf("strict done=%v after %d hanging deliveries", ok, slow.started.Load())
	if !ok || slow.started.Load() > 8 {
		t.Errorf("strict event waited behind the hanging backlog")
	}
}
