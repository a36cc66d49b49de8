package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestPayloadFreedWhenItsEventEnds: once its target returns, an event's
// payload is no longer reachable, while another event of the same claim
// still runs and before its own outcome is recorded (it waits for the
// other's, FinishWait). The pool kept every payload of a claim until the
// batch's last delivery ended: each goroutine ran on the claim's shared
// slice, and each event kept its payload until its outcome was recorded.
// With 20 MB bodies, 8 in flight, that was most of hookbox's memory.
func TestPayloadFreedWhenItsEventEnds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, FinishWait: time.Hour})
		release := make(chan struct{})
		freed := make(chan struct{})
		big := bytes.Repeat([]byte("x"), 1<<20)
		p.Route("fwd", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if ev.DeliveryID == "slow" {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if !bytes.Equal(ev.Payload, big) {
				t.Errorf("fast event delivered with %d bytes, want the %d stored", len(ev.Payload), len(big))
			}
			runtime.AddCleanup(&ev.Payload[0], func(ch chan struct{}) { close(ch) }, freed)
			return nil
		}))
		slow, fast := storetest.Delivery("fwd", "slow"), storetest.Delivery("fwd", "fast")
		slow.Payload, fast.Payload = big, big
		rs := ingest(t, s, slow, fast) // one claim takes both
		start(t, p)

		deadline := time.Now().Add(20 * time.Second)
		for done := false; !done; {
			runtime.GC()
			select {
			case <-freed:
				done = true
			case <-time.After(10 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatal("the fast event's payload is still reachable 20s after its target returned, while the slow one runs")
				}
			}
		}
		// Its outcome still waits for the slow delivery's.
		if e, err := s.Event(context.Background(), rs[1].ID); err != nil {
			t.Fatal(err)
		} else if e.Status != hookbox.StatusProcessing {
			t.Fatalf("fast event is %s while the slow one runs, want processing (outcome waiting)", e.Status)
		}
		close(release)
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		waitStatus(t, s, p, rs[1].ID, hookbox.StatusDone)
	})
}

// budgetQueue is a store that counts the payload bytes it hands to the
// pool: a claim adds what it returned to held (the target takes it off
// when it returns), and each pick of a transaction of Go handlers notes
// its own total. Each peak is the most seen at once.
type budgetQueue struct {
	hookbox.Queue
	held, heldPeak atomic.Int64
	pickPeak       atomic.Int64
}

func (q *budgetQueue) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := q.Queue.Claim(ctx, p)
	raise(&q.heldPeak, q.held.Add(payloadBytes(evs)))
	return evs, err
}

func (q *budgetQueue) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	wt, err := q.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	return budgetWorkTx{wt, q}, nil
}

type budgetWorkTx struct {
	hookbox.WorkTx
	q *budgetQueue
}

func (w budgetWorkTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	evs, at, err := w.WorkTx.Pick(ctx, p)
	raise(&w.q.pickPeak, payloadBytes(evs))
	return evs, at, err
}

func payloadBytes(evs []hookbox.Event) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e.Payload))
	}
	return n
}

// raise sets peak to n if n is larger.
func raise(peak *atomic.Int64, n int64) {
	for {
		old := peak.Load()
		if n <= old || peak.CompareAndSwap(old, n) {
			return
		}
	}
}

// payloadScale is the payload size of the budget tests: large enough to
// stand out from everything else a claim holds, small enough that moving
// 48 of them through SQLite under -race takes seconds, not most of a
// test's 20 s bounds. The budgets are counted in payloads of it.
const payloadScale = 1 << 20

// TestPayloadsHeldWithinBudget: a backlog of large payloads (24 of 1 MiB)
// worked by a target that holds each request until the test lets it
// answer, and by Go handlers: the payload bytes claimed and not yet
// returned by their targets never pass MaxPayloadBytes (4 MiB, four
// payloads), and no transaction of Go handlers picks more than it.
// Before, the first claim took every event the free slots allowed (24 of
// the 32), six times the budget at once, and a pick for Go handlers every
// event due up to BatchSize (256): with 32 MiB bodies, 8 GiB. Both
// databases.
//
// The sizes are payloadScale's: at 4 MiB and 16 MiB, under -race, SQLite
// took 25 to 45 s on its own (copying each payload through the driver
// costs time in proportion to its bytes), and a run beside the package's
// other tests passed its 20 s bounds.
func TestPayloadsHeldWithinBudget(t *testing.T) {
	const size, n, budget = payloadScale, 24, 4 * payloadScale
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &budgetQueue{Queue: s}
		p := worker.New(q, worker.Options{PollInterval: 10 * time.Millisecond, MaxPayloadBytes: budget})
		release := make(chan struct{})
		p.Route("big", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			defer q.held.Add(-int64(len(ev.Payload)))
			if len(ev.Payload) != size {
				t.Errorf("event %d delivered with %d bytes, want %d", ev.ID, len(ev.Payload), size)
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
		var handled atomic.Int64
		p.Handle("bigtx", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			handled.Add(1)
			return nil
		})
		var last []hookbox.Receipt
		for i := range n {
			a, b := storetest.Delivery("big", fmt.Sprint(i)), storetest.Delivery("bigtx", fmt.Sprint(i))
			a.Payload, b.Payload = bytes.Repeat([]byte{byte(i)}, size), bytes.Repeat([]byte{byte(i)}, size)
			last = ingest(t, s, a, b)
		}
		start(t, p)
		var heapPeak uint64
		for range n {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heapPeak = max(heapPeak, m.HeapInuse)
			select {
			case release <- struct{}{}:
			case <-time.After(20 * time.Second):
				t.Fatal("no delivery came to the target within 20 s")
			}
		}
		waitStatus(t, s, p, last[0].ID, hookbox.StatusDone)
		waitStatus(t, s, p, last[1].ID, hookbox.StatusDone)
		t.Logf("targets: at most %d MiB of payloads claimed and not returned; Go handlers: at most %d MiB picked by one transaction; heap in use at most %d MiB while targets held requests",
			q.heldPeak.Load()>>20, q.pickPeak.Load()>>20, heapPeak>>20)
		if got := q.heldPeak.Load(); got > budget {
			t.Errorf("targets held %d MiB of payloads at once, past the budget of %d MiB", got>>20, budget>>20)
		}
		if got := q.pickPeak.Load(); got > budget {
			t.Errorf("a transaction of Go handlers picked %d MiB of payloads, past the budget of %d MiB", got>>20, budget>>20)
		}
		if handled.Load() < n {
			t.Errorf("Go handlers ran %d times, want at least %d", handled.Load(), n)
		}
	})
}

// heldQueue is a store that counts the payload bytes the pool holds at
// once, as the store hands them out: a claim's until its target returns
// (the test's target gives them back), a pick's until its transaction
// ends. peak is the most held at once.
type heldQueue struct {
	hookbox.Queue
	held, peak atomic.Int64
}

func (q *heldQueue) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := q.Queue.Claim(ctx, p)
	raise(&q.peak, q.held.Add(payloadBytes(evs)))
	return evs, err
}

func (q *heldQueue) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	wt, err := q.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	return &heldWorkTx{WorkTx: wt, q: q}, nil
}

// heldWorkTx counts what its picks returned until it commits or rolls
// back.
type heldWorkTx struct {
	hookbox.WorkTx
	q      *heldQueue
	picked int64
}

func (w *heldWorkTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	evs, at, err := w.WorkTx.Pick(ctx, p)
	w.picked += payloadBytes(evs)
	raise(&w.q.peak, w.q.held.Add(payloadBytes(evs)))
	return evs, at, err
}

func (w *heldWorkTx) Commit(ctx context.Context) error {
	defer w.end()
	return w.WorkTx.Commit(ctx)
}

func (w *heldWorkTx) Rollback() error {
	defer w.end()
	return w.WorkTx.Rollback()
}

func (w *heldWorkTx) end() {
	w.q.held.Add(-w.picked)
	w.picked = 0
}

// TestPayloadsHeldWithinBudgetTogether: a backlog of large payloads (24
// of 1 MiB for a target, 24 for a Go handler), each target delivery and
// each handler holding its event until the test lets it go, one at a
// time, with four transactions of Go handlers (TxWorkers, as serve runs
// PostgreSQL): the payload bytes held at once, by the targets' claims
// and by the transactions' picks together, never pass MaxPayloadBytes
// (4 MiB, four payloads). Before, each transaction picked within what the
// targets left, counting neither the others' picks nor its own, and the
// targets' claims did not count the transactions': on PostgreSQL four
// transactions held the whole budget each at once; on SQLite a
// transaction took an event when the targets held the whole budget, and
// the targets claimed the whole budget after a transaction had picked
// it. Both databases. The sizes are payloadScale's (see
// TestPayloadsHeldWithinBudget).
func TestPayloadsHeldWithinBudgetTogether(t *testing.T) {
	const size, n, budget = payloadScale, 24, 4 * payloadScale
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		q := &heldQueue{Queue: s}
		// A batch of 4, the events the budget fits: on PostgreSQL a pick
		// locks up to a batch of due rows, those past its budget
		// included, which the other transactions' picks then skip.
		p := worker.New(q, worker.Options{PollInterval: 10 * time.Millisecond, MaxPayloadBytes: budget, TxWorkers: 4, BatchSize: 4})
		release := make(chan struct{})
		hold := func(ctx context.Context, ev *hookbox.Event) error {
			if len(ev.Payload) != size {
				t.Errorf("event %d worked with %d bytes, want %d", ev.ID, len(ev.Payload), size)
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		p.Route("big", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			defer q.held.Add(-int64(len(ev.Payload)))
			return hold(ctx, ev)
		}))
		p.Handle("bigtx", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error { return hold(ctx, ev) })
		var last []hookbox.Receipt
		for i := range n {
			a, b := storetest.Delivery("big", fmt.Sprint(i)), storetest.Delivery("bigtx", fmt.Sprint(i))
			a.Payload, b.Payload = bytes.Repeat([]byte{byte(i)}, size), bytes.Repeat([]byte{byte(i)}, size)
			last = ingest(t, s, a, b)
		}
		start(t, p)
		for range 2 * n {
			select {
			case release <- struct{}{}:
			case <-time.After(20 * time.Second):
				t.Fatal("no delivery or handler came to be let go within 20 s")
			}
		}
		waitStatus(t, s, p, last[0].ID, hookbox.StatusDone)
		waitStatus(t, s, p, last[1].ID, hookbox.StatusDone)
		t.Logf("at most %d MiB of payloads held at once by claims and picks together", q.peak.Load()>>20)
		if got := q.peak.Load(); got > budget {
			t.Errorf("claims and transactions held %d MiB of payloads at once, past the budget of %d MiB", got>>20, budget>>20)
		}
	})
}

// TestPayloadLargerThanBudgetWorked: an event whose payload is larger
// than MaxPayloadBytes is still worked, by a Go handler and by a target,
// with the four transactions of Go handlers and the targets sharing the
// budget: a claim takes its first event whatever its size while nothing
// else is held, so none waits for a budget it can never fit in. Both
// databases.
func TestPayloadLargerThanBudgetWorked(t *testing.T) {
	const budget = 1 << 20
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, MaxPayloadBytes: budget, TxWorkers: 4})
		var sizes sync.Map
		p.Route("big", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			sizes.Store(ev.ID, len(ev.Payload))
			return nil
		}))
		p.Handle("bigtx", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			sizes.Store(ev.ID, len(ev.Payload))
			return nil
		})
		var rs []hookbox.Receipt
		for i := range 3 {
			a, b := storetest.Delivery("big", fmt.Sprint(i)), storetest.Delivery("bigtx", fmt.Sprint(i))
			a.Payload, b.Payload = bytes.Repeat([]byte{'a'}, 3*budget), bytes.Repeat([]byte{'b'}, 3*budget)
			rs = append(rs, ingest(t, s, a, b)...)
		}
		start(t, p)
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
			if n, _ := sizes.Load(r.ID); n != 3*budget {
				t.Errorf("event %d worked with %v bytes, want %d", r.ID, n, 3*budget)
			}
		}
	})
}
