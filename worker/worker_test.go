package worker_test

import (
	"context"
	"errors"
	"fmt"
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

// fast is a policy that retries quickly, for tests.
var fast = worker.Policy{MaxAttempts: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Timeout: 5 * time.Second}

// start runs p until the test ends.
func start(t *testing.T, p *worker.Pool) {
	t.Helper()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
}

func ingest(t *testing.T, s dbtest.Store, ds ...hookbox.Delivery) []hookbox.Receipt {
	t.Helper()
	rs, err := storetest.IngestRetried(t, s, ds)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// waitStatus waits until event id reaches want, failing after 20s.
func waitStatus(t *testing.T, s dbtest.Store, p *worker.Pool, id int64, want hookbox.Status) hookbox.Event {
	t.Helper()
	return waitStatusWithin(t, s, p, id, want, 20*time.Second)
}

// waitStatusWithin is waitStatus failing after limit, for work whose time
// grows with the machine's load (hundreds of commits, each a disk sync).
func waitStatusWithin(t *testing.T, s dbtest.Store, p *worker.Pool, id int64, want hookbox.Status, limit time.Duration) hookbox.Event {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == want {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s after %v, want %s (last error %q)", id, e.Status, limit, want, e.LastError)
		}
		p.Notify()
		time.Sleep(5 * time.Millisecond)
	}
}

// claimKey inserts a business key in the handler's transaction.
func claimKey(ctx context.Context, tx *hookbox.Tx, key string) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', $1) ON CONFLICT DO NOTHING`, key)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

var probeSeq atomic.Int64

func keyCount(t *testing.T, s dbtest.Store, p *worker.Pool, key string) int {
	t.Helper()
	// Read through a handler so the test needs nothing but the interfaces.
	var n atomic.Int64
	n.Store(-1)
	// A source of its own: pools of earlier probes are still running, and
	// must not take this probe's event.
	probe := fmt.Sprint("probe-", probeSeq.Add(1))
	rs := ingest(t, s, storetest.Delivery(probe, probe))
	q := worker.New(s, worker.Options{})
	q.Handle(probe, "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		var c int64
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = 'test' AND key = $1`, key).Scan(&c)
		n.Store(c)
		return err
	})
	start(t, q)
	waitStatus(t, s, q, rs[0].ID, hookbox.StatusDone)
	return int(n.Load())
}

func TestHandlerCommitsEffectWithDone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: time.Hour})
		var calls atomic.Int64
		p.Handle("shop", "order.paid", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			calls.Add(1)
			_, err := claimKey(ctx, tx, "order-"+ev.DeliveryID)
			return err
		})
		start(t, p)
		d := storetest.Delivery("shop", "o1")
		d.EventType = "order.paid"
		other := storetest.Delivery("shop", "o2")
		other.EventType = "order.refunded" // no handler: done without work
		rs := ingest(t, s, d, other)
		p.Notify() // the poll interval is an hour: only the wake-up can start it
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		waitStatus(t, s, p, rs[1].ID, hookbox.StatusDone)
		if calls.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", calls.Load())
		}
		if n := keyCount(t, s, p, "order-o1"); n != 1 {
			t.Errorf("business key rows = %d, want 1", n)
		}
	})
}

func TestRetriesThenDead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		var calls atomic.Int64
		p.Handle("flaky", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			calls.Add(1)
			if _, err := claimKey(ctx, tx, "flaky-write"); err != nil {
				return err
			}
			return errors.New("upstream is down")
		})
		p.SetPolicy("flaky", fast)
		start(t, p)
		rs := ingest(t, s, storetest.Delivery("flaky", "1"))
		e := waitStatus(t, s, p, rs[0].ID, hookbox.StatusDead)
		if e.Attempts != fast.MaxAttempts || calls.Load() != int64(fast.MaxAttempts) {
			t.Errorf("attempts %d, calls %d, want %d", e.Attempts, calls.Load(), fast.MaxAttempts)
		}
		if e.LastError != "upstream is down" || len(e.Payload) == 0 {
			t.Errorf("dead event = %+v", e)
		}
		as, err := s.Attempts(context.Background(), rs[0].ID)
		if err != nil || len(as) != fast.MaxAttempts {
			t.Fatalf("attempts recorded = %d (%v), want %d", len(as), err, fast.MaxAttempts)
		}
		for i, a := range as {
			want := hookbox.AttemptRetry
			if i == len(as)-1 {
				want = hookbox.AttemptDead
			}
			if a.Outcome != want || a.Attempt != i+1 || a.Error != "upstream is down" {
				t.Errorf("attempt %d = %+v", i, a)
			}
			if i > 0 && a.StartedAt.Before(as[i-1].FinishedAt.Add(fast.BackoffMin).Add(-time.Millisecond)) {
				t.Errorf("attempt %d started %v after the previous ended, before the backoff floor %v",
					i+1, a.StartedAt.Sub(as[i-1].FinishedAt), fast.BackoffMin)
			}
		}
		if n := keyCount(t, s, p, "flaky-write"); n != 0 {
			t.Errorf("a failing handler's write was kept (%d rows)", n)
		}
	})
}

func TestPermanentAndPanic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.Handle("perm", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			return worker.Permanent(errors.New("unknown product"))
		})
		p.Handle("panics", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.Attempts == 1 {
				panic("nil map")
			}
			return nil
		})
		p.SetPolicy("perm", fast)
		p.SetPolicy("panics", fast)
		start(t, p)
		rs := ingest(t, s, storetest.Delivery("perm", "1"), storetest.Delivery("panics", "1"))
		if e := waitStatus(t, s, p, rs[0].ID, hookbox.StatusDead); e.Attempts != 1 {
			t.Errorf("permanent error took %d attempts, want 1", e.Attempts)
		}
		e := waitStatus(t, s, p, rs[1].ID, hookbox.StatusDone)
		as, _ := s.Attempts(context.Background(), e.ID)
		if e.Attempts != 2 || len(as) != 2 || as[0].Outcome != hookbox.AttemptRetry || as[0].Error != "panic: nil map" {
			t.Errorf("panic attempts: event %+v, attempts %+v", e, as)
		}
	})
}

// TestCrashedLeaseIsWorkedAgain: a worker claims an event and dies (it never
// finishes). When the lease runs out another pool works it; the business key
// makes the effect happen once even though the first worker may have done
// it before dying.
func TestCrashedLeaseIsWorkedAgain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		rs := ingest(t, s, storetest.Delivery("pay", "ord_9"))
		crashed, err := s.Claim(context.Background(), hookbox.ClaimParams{
			Owner: "crashed-worker", Limit: 1, Lease: 300 * time.Millisecond, Sources: []string{"pay"},
		})
		if err != nil || len(crashed) != 1 {
			t.Fatalf("claim: %v %v", crashed, err)
		}
		var effects atomic.Int64
		p := worker.New(s, worker.Options{PollInterval: 20 * time.Millisecond})
		p.Handle("pay", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			first, err := claimKey(ctx, tx, "licence-"+ev.DeliveryID)
			if first {
				effects.Add(1)
			}
			return err
		})
		start(t, p)
		e := waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		if e.Attempts != 2 {
			t.Errorf("attempts = %d, want 2 (the crashed one and the rerun)", e.Attempts)
		}
		if effects.Load() != 1 || keyCount(t, s, p, "licence-ord_9") != 1 {
			t.Errorf("effects = %d, want exactly 1", effects.Load())
		}
	})
}

// TestLeaseOutlastsTheAttempt: a target's attempt has its deadline well
// before its event's lease ends (half a timeout before, at least; the
// lease is twice the timeout), on a plain and on a strict source. An exec
// command's supervisor kills the command at that deadline by itself, so
// when the pool's process is stopped and extends nothing, the command is
// dead before another process can claim the event.
func TestLeaseOutlastsTheAttempt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		const timeout = 10 * time.Second
		deadlines := make(chan time.Time, 2)
		release := make(chan struct{})
		defer close(release)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		for _, src := range []string{"plain", "strict"} {
			p.Route(src, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
				d, _ := ctx.Deadline()
				deadlines <- d
				<-release
				return nil
			}))
			p.SetPolicy(src, worker.Policy{Timeout: timeout, Strict: src == "strict"})
		}
		start(t, p)
		for _, src := range []string{"plain", "strict"} {
			id := ingest(t, s, storetest.Delivery(src, "x"))[0].ID
			p.Notify()
			var deadline time.Time
			select {
			case deadline = <-deadlines:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: the delivery did not start within 20 s", src)
			}
			e, err := s.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != hookbox.StatusProcessing || deadline.IsZero() || e.NextAttemptAt.Sub(deadline) < timeout/2 {
				t.Errorf("%s: the attempt's deadline is %v, its event %s with its lease ending %v later; want it to end at least %v after the deadline",
					src, deadline, e.Status, e.NextAttemptAt.Sub(deadline), timeout/2)
			}
		}
	})
}

func TestTargetOutsideTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		var mu sync.Mutex
		seen := map[string]int{}
		p.Route("fwd", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			seen[ev.DeliveryID]++
			if ev.DeliveryID == "gone" {
				return worker.Permanent(errors.New("410 Gone"))
			}
			if ev.DeliveryID == "slow-start" && ev.Attempts == 1 {
				return worker.RetryAfter(errors.New("429"), 10*time.Millisecond)
			}
			return nil
		}))
		p.SetPolicy("fwd", fast)
		start(t, p)
		var ds []hookbox.Delivery
		for i := range 50 {
			ds = append(ds, storetest.Delivery("fwd", fmt.Sprint(i)))
		}
		ds = append(ds, storetest.Delivery("fwd", "gone"), storetest.Delivery("fwd", "slow-start"))
		rs := ingest(t, s, ds...)
		for i, r := range rs {
			want := hookbox.StatusDone
			if ds[i].DeliveryID == "gone" {
				want = hookbox.StatusDead
			}
			waitStatus(t, s, p, r.ID, want)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range 50 {
			if seen[fmt.Sprint(i)] != 1 {
				t.Errorf("event %d delivered %d times", i, seen[fmt.Sprint(i)])
			}
		}
		if seen["slow-start"] != 2 || seen["gone"] != 1 {
			t.Errorf("slow-start %d (want 2), gone %d (want 1)", seen["slow-start"], seen["gone"])
		}
	})
}

// TestStopCancelsAndReleases: a target still running when the shutdown
// grace ends is cancelled and its event released for a prompt retry.
func TestStopCancelsAndReleases(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		running := make(chan struct{})
		p.Route("stuck", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			close(running)
			<-ctx.Done()
			return ctx.Err()
		}))
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		rs := ingest(t, s, storetest.Delivery("stuck", "1"))
		p.Notify()
		<-running
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop = %v, want the grace period to run out", err)
		}
		e, err := s.Event(context.Background(), rs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != hookbox.StatusPending || e.LeaseOwner != "" || e.NextAttemptAt.After(time.Now()) {
			t.Errorf("after shutdown: %+v, want pending, unleased, due now", e)
		}
	})
}

// TestTxBudgetSplitsBatches: with a budget so small that each transaction
// runs one handler, every event of a large batch is still worked once.
func TestTxBudgetSplitsBatches(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxBudget: time.Nanosecond})
		drainOnce(t, s, p, "split", 40)
	})
}

// TestWritingHandlersPastTheStoreCap: more writing handlers than one
// PostgreSQL transaction keeps (64) are claimed at once; the rest run in
// later transactions, each event once, none counted twice.
func TestWritingHandlersPastTheStoreCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, BatchSize: 256})
		drainOnce(t, s, p, "cap", 300)
	})
}

// drainOnce registers a handler for source that claims a business key per
// event, stores n events, starts p, and checks that every event is done
// after one attempt and its handler ran exactly once.
func drainOnce(t *testing.T, s dbtest.Store, p *worker.Pool, source string, n int) {
	t.Helper()
	var mu sync.Mutex
	runs := map[string]int{}
	p.Handle(source, "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		mu.Lock()
		runs[ev.DeliveryID]++
		mu.Unlock()
		_, err := claimKey(ctx, tx, source+"-"+ev.DeliveryID)
		return err
	})
	var ds []hookbox.Delivery
	for i := range n {
		ds = append(ds, storetest.Delivery(source, fmt.Sprint(i)))
	}
	rs := ingest(t, s, ds...)
	start(t, p)
	for _, r := range rs {
		if e := waitStatus(t, s, p, r.ID, hookbox.StatusDone); e.Attempts != 1 {
			t.Errorf("event %d took %d attempts", e.ID, e.Attempts)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if runs[fmt.Sprint(i)] != 1 {
			t.Errorf("event %d ran %d times", i, runs[fmt.Sprint(i)])
		}
	}
}

// TestStopReleasesHandlers: a Go handler still running when the grace
// period ends is cancelled; its writes roll back and its event is released
// for a prompt retry.
func TestStopReleasesHandlers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		running := make(chan struct{})
		p.Handle("slow", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if _, err := claimKey(ctx, tx, "slow-write"); err != nil {
				return err
			}
			close(running)
			<-ctx.Done()
			return ctx.Err()
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		rs := ingest(t, s, storetest.Delivery("slow", "1"))
		p.Notify()
		<-running
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop = %v, want the grace period to run out", err)
		}
		e, err := s.Event(context.Background(), rs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != hookbox.StatusPending || e.LeaseOwner != "" || e.NextAttemptAt.After(time.Now()) {
			t.Errorf("after shutdown: %+v, want pending, unleased, due now", e)
		}
		n := -1
		s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE key = 'slow-write'`).Scan(&n)
		})
		if n != 0 {
			t.Errorf("the cancelled handler's write was kept")
		}
	})
}

// TestSeveralTxWorkers: with several handler transactions at once, every
// event still runs exactly once.
func TestSeveralTxWorkers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxWorkers: 3})
		var mu sync.Mutex
		runs := map[string]int{}
		p.Handle("many", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			mu.Lock()
			runs[ev.DeliveryID]++
			mu.Unlock()
			_, err := claimKey(ctx, tx, "many-"+ev.DeliveryID)
			return err
		})
		var ds []hookbox.Delivery
		for i := range 300 {
			ds = append(ds, storetest.Delivery("many", fmt.Sprint(i)))
		}
		rs := ingest(t, s, ds...)
		start(t, p)
		p.Notify()
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range 300 {
			if runs[fmt.Sprint(i)] != 1 {
				t.Errorf("event %d ran %d times", i, runs[fmt.Sprint(i)])
			}
		}
	})
}

// TestStrictTargetWakesForTheNext: a strict source's events with a target
// are delivered one after another, in order, without waiting for a poll
// (an hour here): the pool wakes itself when a target's slot is freed and
// again when the outcome has committed (the slot is freed first, while the
// next strict event is still held back by this one).
func TestStrictTargetWakesForTheNext(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: time.Hour})
		var mu sync.Mutex
		var order []string
		p.Route("strict", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			order = append(order, ev.DeliveryID)
			mu.Unlock()
			return nil
		}))
		p.SetPolicy("strict", worker.Policy{Strict: true})
		start(t, p)
		var ds []hookbox.Delivery
		for i := range 5 {
			ds = append(ds, storetest.Delivery("strict", fmt.Sprint(i)))
		}
		rs := ingest(t, s, ds...)
		p.Notify()
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
		}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(order) != "[0 1 2 3 4]" {
			t.Errorf("delivered in order %v, want [0 1 2 3 4]", order)
		}
	})
}

// TestPermanentRefusalsLeaveTheCircuitClosed: a target that turns events
// away for good (Permanent: a 410) while it takes the others is healthy;
// its refusals, however many in a row, do not open its circuit, so they
// cannot pause the events it would take (the cool-down here is an hour:
// an opened circuit would leave them waiting).
func TestPermanentRefusalsLeaveTheCircuitClosed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var opened atomic.Int64
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond,
			OnCircuit: func(_ string, open bool) {
				if open {
					opened.Add(1)
				}
			}})
		p.Route("g", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if strings.HasPrefix(ev.DeliveryID, "gone") {
				return worker.Permanent(errors.New("410 Gone"))
			}
			return nil
		}))
		p.SetControls("g", worker.Controls{CircuitAfter: 2, CircuitCooldown: time.Hour})
		start(t, p)
		var ds []hookbox.Delivery
		for i := range 6 {
			ds = append(ds, storetest.Delivery("g", fmt.Sprint("gone-", i)))
		}
		for i := range 6 {
			ds = append(ds, storetest.Delivery("g", fmt.Sprint("ok-", i)))
		}
		rs := ingest(t, s, ds...)
		for i, r := range rs {
			want := hookbox.StatusDone
			if i < 6 {
				want = hookbox.StatusDead
			}
			waitStatus(t, s, p, r.ID, want)
		}
		if n := opened.Load(); n != 0 {
			t.Errorf("the circuit opened %d times on permanent refusals", n)
		}
	})
}

// TestOrderNeedsLeases: a route that runs one event per order key at a
// time cannot be worked by apply-only handlers (picked several to a
// transaction, without leases): Start refuses it and says what to do,
// rather than ignore the order. A two-phase handler is accepted.
func TestOrderNeedsLeases(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	p := worker.New(s, worker.Options{})
	p.Handle("o/ledger", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error { return nil })
	p.SetControls("o/ledger", worker.Controls{ByKey: true})
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "o/ledger") || !strings.Contains(err.Error(), "HandlePhases") {
		t.Fatalf("Start = %v, want a refusal naming the route and HandlePhases", err)
	}

	p = worker.New(s, worker.Options{})
	p.HandlePhases("o/ledger", "", worker.TwoPhase(
		func(ctx context.Context, ev *hookbox.Event) (string, error) { return "", nil },
		func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, _ string) error { return nil }))
	p.SetControls("o/ledger", worker.Controls{ByKey: true})
	start(t, p)
}
