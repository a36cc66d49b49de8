package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// waitDoneQuiet waits up to d for event id to be done, without waking
// the pool (waitStatus's Notify would make claims the test counts).
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
func TestFewerSlotsThanQueues(t *testing.T) {
	for _, ctl := range []bool{false, true} {
		t.Run(fmt.Sprint("controls=", ctl), func(t *testing.T) {
			s := dbtest.Open(t, dbtest.SQLiteURL(t))
			var ds []hookbox.Delivery
			for i := range 15 {
				ds = append(ds, storetest.Delivery("h1", fmt.Sprint("a", i)), storetest.Delivery("h2", fmt.Sprint("b", i)))
			}
			ingest(t, s, ds...)
			p := worker.New(s, worker.Options{Concurrency: 2, PollInterval: 50 * time.Millisecond, ClaimDelay: 20 * time.Millisecond})
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
			for h1.started.Load()+h2.started.Load() < 2 {
				time.Sleep(time.Millisecond)
			}
			rs := ingest(t, s, storetest.Delivery("fast", "f1"))
			p.Notify()
			ok := waitDoneQuiet(t, s, rs[0].ID, 3*time.Second)
			t.Logf("fast done=%v; hanging deliveries started: h1 %d, h2 %d", ok, h1.started.Load(), h2.started.Load())
			if n := h1.started.Load() + h2.started.Load(); !ok || n > 6 {
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
	var ds []hookbox.Delivery
	for i := range 40 {
		ds = append(ds, storetest.Delivery("slow", fmt.Sprint("s", i)))
	}
	ingest(t, s, ds...)
	p := worker.New(s, worker.Options{Concurrency: 4, PollInterval: 50 * time.Millisecond})
	slow := &hanging{}
	p.SetPolicy("slow", worker.Policy{Timeout: 150 * time.Millisecond, MaxAttempts: 3, BackoffMin: time.Hour, BackoffMax: time.Hour})
	p.Route("slow", slow)
	p.Route("strict", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	p.SetPolicy("strict", worker.Policy{Strict: true, Timeout: time.Second, MaxAttempts: 3})
	start(t, p)
	for slow.started.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	rs := ingest(t, s, storetest.Delivery("strict", "x"))
	p.Notify()
	ok := waitDoneQuiet(t, s, rs[0].ID, 3*time.Second)
	t.Logf("strict done=%v after %d hanging deliveries", ok, slow.started.Load())
	if !ok || slow.started.Load() > 8 {
		t.Errorf("strict event waited behind the hanging backlog")
	}
}
