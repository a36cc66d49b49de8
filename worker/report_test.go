package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// reports keeps what Options.OnAttempt was told: one line per attempt,
// "event id: outcome" (hookbox.Outcome.AttemptOutcome, or
// hookbox.AttemptLost).
type reports struct {
	mu    sync.Mutex
	lines []string
}

func (r *reports) onAttempt(ev *hookbox.Event, o hookbox.Outcome, err error) {
	outcome := o.AttemptOutcome()
	if err != nil {
		outcome = hookbox.AttemptLost
	}
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprintf("%d: %s", ev.ID, outcome))
	r.mu.Unlock()
}

// of returns the outcomes reported for event id, in order.
func (r *reports) of(id int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if s, ok := strings.CutPrefix(l, fmt.Sprintf("%d: ", id)); ok {
			out = append(out, s)
		}
	}
	return out
}

// await waits until event id has n outcomes reported, failing after 20 s.
func (r *reports) await(t *testing.T, p *worker.Pool, id int64, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := r.of(id)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d: reported %v after 20 s, want %d outcomes", id, got, n)
		}
		p.Notify()
		time.Sleep(5 * time.Millisecond)
	}
}

// TestChargedAttemptsAreReported: the attempts a starting pool charges to
// the events a dead pool was running (queue.Runner.Recover) are reported
// as any other attempt: to OnAttempt (hookbox_attempts_total,
// hookbox_dead_total), with "event dead" for the one it ends, and the
// line about the charge names the events. They went unreported: the dead
// pool's poison event, which kills each process that runs it, never showed
// in the dead-event alert's metric.
func TestChargedAttemptsAreReported(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		rs := ingest(t, s, storetest.Delivery("poison", "1"), storetest.Delivery("crash", "1"))
		poison, crash := rs[0].ID, rs[1].ID
		// A pool of another process picks both, marks them, and dies while
		// their handlers run: no commit, and no record of that pool.
		wt, err := s.BeginWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs, _, err := wt.Pick(ctx, hookbox.ClaimParams{Owner: "gone-1", Limit: 2, Lease: time.Minute, Sources: []string{"poison", "crash"}})
		if err != nil || len(evs) != 2 {
			t.Fatalf("Pick = %d events, %v; want 2", len(evs), err)
		}
		if err := wt.Mark(ctx, hookbox.Mark{Key: "gone/0", Worker: "gone", Events: evs}); err != nil {
			t.Fatal(err)
		}
		if err := wt.Rollback(); err != nil {
			t.Fatal(err)
		}

		var logs syncbuf.Buffer
		var seen reports
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnAttempt: seen.onAttempt})
		p.SetPolicy("poison", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
		p.SetPolicy("crash", worker.Policy{MaxAttempts: 3, Timeout: 10 * time.Second, BackoffMin: time.Hour, BackoffMax: 2 * time.Hour})
		ok := func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil }
		p.Handle("poison", "", ok)
		p.Handle("crash", "", ok)
		charged := time.Now()
		start(t, p) // charges the dead pool's events before it returns

		// The charged attempt of crash waits its backoff (an hour at
		// least): its lease ended at once, and the pool could run it
		// again before the first assertion (reported [retry done]).
		if e, err := s.Event(ctx, crash); err != nil || e.Status != hookbox.StatusProcessing ||
			e.NextAttemptAt.Before(charged.Add(time.Hour-time.Minute)) {
			t.Errorf("crash after its charge: %s, due %v after it (%v); want processing until its retry, an hour on",
				e.Status, e.NextAttemptAt.Sub(charged).Round(time.Millisecond), err)
		}
		if got := seen.of(poison); len(got) != 1 || got[0] != hookbox.AttemptDead {
			t.Errorf("poison (max_attempts 1): reported %v, want [dead]", got)
		}
		if got := seen.of(crash); len(got) != 1 || got[0] != hookbox.AttemptRetry {
			t.Errorf("crash (max_attempts 3): reported %v, want [retry]", got)
		}
		out := logs.String()
		if want := fmt.Sprintf(`msg="event dead" event_id=%d source=poison`, poison); !strings.Contains(out, want) {
			t.Errorf("the log has no %s:\n%s", want, out)
		}
		if want := fmt.Sprintf(`events=2 event_ids="[%d %d]" sources="[poison crash]"`, poison, crash); !strings.Contains(out, want) {
			t.Errorf("the line about the charge does not say %s:\n%s", want, out)
		}
	})
}

// TestReleasedAttemptsAreReported: an attempt whose outcome the store
// could not record is given back (Pool.release) the first time, and on
// the last attempt the second time ends the event dead. Both are reported
// as any other attempt: the release as one after a store failure (not
// "released at shutdown"), the dead event to OnAttempt and as "event
// dead". Neither was reported. The error line of the failure names the
// source.
func TestReleasedAttemptsAreReported(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		// No target's outcome is recorded, only the releases that follow
		// (their error starts "store failed: ", or says that it failed
		// again on the last attempt).
		gate := &finishGate{Store: s, refuse: func(_ context.Context, _ int32, outs []hookbox.Outcome) error {
			for _, o := range outs {
				if !strings.HasPrefix(o.Error, "store failed: ") && !strings.HasPrefix(o.Error, "the store failed again") {
					return errInjected
				}
			}
			return nil
		}}
		var logs syncbuf.Buffer
		var seen reports
		p := worker.New(gate, worker.Options{PollInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnAttempt: seen.onAttempt})
		p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { return nil }))
		p.SetPolicy("fw", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("fw", "1"))[0].ID
		p.Notify()
		got := seen.await(t, p, id, 2)
		if len(got) != 2 || got[0] != hookbox.AttemptReleased || got[1] != hookbox.AttemptDead {
			t.Errorf("reported %v, want [released dead]", got)
		}
		if e := waitFinished(t, s, p, id); e.Status != hookbox.StatusDead {
			t.Errorf("event %s (%q), want dead", e.Status, e.LastError)
		}
		out := logs.String()
		for _, want := range []string{
			fmt.Sprintf(`msg="released after a store failure" event_id=%d source=fw attempt=1`, id),
			fmt.Sprintf(`msg="event dead" event_id=%d source=fw attempt=2`, id),
			fmt.Sprintf(`msg="worker: record outcome" event_id=%d source=fw`, id),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the log has no %s:\n%s", want, out)
			}
		}
		if strings.Contains(out, "released at shutdown") {
			t.Errorf("a release after a store failure is logged as one at shutdown:\n%s", out)
		}
	})
}

// workFails is the real store, but the n-th BeginWork (from 1) fails when
// begin says so, and a transaction it hands out whose Commit commit
// refuses is rolled back instead.
type workFails struct {
	dbtest.Store
	begins atomic.Int32
	begin  func(n int32) error
	commit func(n int32) error
}

func (s *workFails) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	n := s.begins.Add(1)
	if err := s.begin(n); err != nil {
		return nil, err
	}
	wt, err := s.Store.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	return &commitFails{WorkTx: wt, err: s.commit(n)}, nil
}

// commitFails is a WorkTx whose Commit fails with err (when not nil),
// rolling back.
type commitFails struct {
	hookbox.WorkTx
	err error
}

func (w *commitFails) Commit(ctx context.Context) error {
	if w.err != nil {
		w.WorkTx.Rollback()
		return w.err
	}
	return w.WorkTx.Commit(ctx)
}

// TestRecordedBeforeAStoreFailureIsReported: when a shared transaction of
// Go handlers fails at its commit, each event is worked again alone; an
// event whose own transaction commits before the store fails the next
// one's is done, and is reported so. Its outcome was dropped with the
// error (queue.Runner.ClaimWork returned it, the pool did not look).
func TestRecordedBeforeAStoreFailureIsReported(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		rs := ingest(t, s, storetest.Delivery("app", "1"), storetest.Delivery("app", "2"))
		// The first transaction (both events) fails at its commit, the
		// second (the first event, alone) commits, the third (the second
		// event, alone) cannot begin.
		store := &workFails{Store: s,
			begin: func(n int32) error {
				if n == 3 {
					return errInjected
				}
				return nil
			},
			commit: func(n int32) error {
				if n == 1 {
					return errInjected
				}
				return nil
			}}
		var seen reports
		p := worker.New(store, worker.Options{PollInterval: 10 * time.Millisecond, OnAttempt: seen.onAttempt})
		p.Handle("app", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, p)
		for _, r := range rs {
			if got := seen.await(t, p, r.ID, 1); len(got) != 1 || got[0] != hookbox.AttemptDone {
				t.Errorf("event %d: reported %v, want [done]", r.ID, got)
			}
		}
		if n := store.begins.Load(); n < 3 {
			t.Errorf("%d transactions begun; the failure this test is about needs 3", n)
		}
	})
}

// TestInFlightCountsHandlers: InFlight (the "stopping" line's in_flight)
// counts an apply-only handler running in a transaction of events picked
// without a lease; it counted leased events only, and said 0.
func TestInFlightCountsHandlers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		running, release := make(chan struct{}), make(chan struct{})
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.Handle("app", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error {
			close(running)
			<-release
			return nil
		})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("app", "1"))[0].ID
		p.Notify()
		<-running
		n := p.InFlight()
		close(release)
		if n != 1 {
			t.Errorf("InFlight() = %d while one handler runs, want 1", n)
		}
		waitStatus(t, s, p, id, hookbox.StatusDone)
		deadline := time.Now().Add(20 * time.Second)
		for p.InFlight() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("InFlight() = %d 20 s after the handler returned, want 0", p.InFlight())
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// claimsFail is the real store, but every claim fails, as in an outage:
// those for targets (Claim) and those for Go handlers (BeginWork).
type claimsFail struct {
	dbtest.Store
	claims, begins atomic.Int32
}

func (s *claimsFail) Claim(context.Context, hookbox.ClaimParams) ([]hookbox.Event, error) {
	s.claims.Add(1)
	return nil, errInjected
}

func (s *claimsFail) BeginWork(context.Context) (hookbox.WorkTx, error) {
	s.begins.Add(1)
	return nil, errInjected
}

// TestOutageLogsSpacedOut: while the store fails, each kind of failed call
// is logged once every ten seconds (the ingest side's interval), not once
// per poll of each claiming loop: about three ERROR lines a second, with
// no traffic, 11,000 in an hour's outage.
func TestOutageLogsSpacedOut(t *testing.T) {
	s := &claimsFail{Store: dbtest.Open(t, dbtest.SQLiteURL(t))}
	var logs syncbuf.Buffer
	p := worker.New(s, worker.Options{PollInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.Handle("app", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { return nil }))
	began := time.Now()
	start(t, p)
	// Once a claim for Go handlers failed, they are claimed as targets'
	// events are, one at a time (the pool recovers): both loops then call
	// Claim.
	awaitCount(t, "failed claims", &s.claims, 100)
	awaitCount(t, "failed transactions for Go handlers", &s.begins, 1)
	out := logs.String()
	most := 1 + int(time.Since(began)/(10*time.Second))
	for _, msg := range []string{"worker: claim for targets", "worker: claim and run handlers"} {
		if n := strings.Count(out, `level=ERROR msg="`+msg+`"`); n < 1 || n > most {
			t.Errorf("%d lines %q after 100 failed claims, want 1 (%d if ten seconds passed):\n%s", n, msg, most, out)
		}
	}
}

// claimsFailFor is a store whose claims fail until up is set.
type claimsFailFor struct {
	dbtest.Store
	up     atomic.Bool
	failed atomic.Int32
}

func (s *claimsFailFor) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	if !s.up.Load() {
		s.failed.Add(1)
		return nil, errInjected
	}
	return s.Store.Claim(ctx, p)
}

// TestStoreBackLogged: once claims succeed again after failing, one info
// line says so, with how many failed; a loop that never failed, and later
// successes, write none. After an outage's spaced-out ERROR lines, silence
// could not tell a store that answers again from one still down.
func TestStoreBackLogged(t *testing.T) {
	s := &claimsFailFor{Store: dbtest.Open(t, dbtest.SQLiteURL(t))}
	var logs syncbuf.Buffer
	p := worker.New(s, worker.Options{PollInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var done atomic.Int32
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { done.Add(1); return nil }))
	start(t, p)
	awaitCount(t, "failed claims", &s.failed, 20)
	if strings.Contains(logs.String(), "answers again") {
		t.Fatalf("a line says the store answers again while claims fail:\n%s", logs.String())
	}
	s.up.Store(true)
	ingest(t, s, storetest.Delivery("fw", "1"))
	p.Notify()
	awaitCount(t, "events worked", &done, 1)
	ingest(t, s, storetest.Delivery("fw", "2"))
	p.Notify()
	awaitCount(t, "events worked", &done, 2)
	out := logs.String()
	if n := strings.Count(out, `level=INFO msg="worker: claim for targets: the store answers again" failures=`); n != 1 {
		t.Errorf("%d lines say claims for targets work again, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "answers again"); n != 1 {
		t.Errorf("%d lines say the store answers again, want 1:\n%s", n, out)
	}
}

// TestEventStoreFailuresSpacedOut: while the store refuses every outcome,
// each event's "worker: record outcome" line is spaced out like the
// claims' (one every ten seconds, the rest at debug): with traffic, an
// outage wrote one ERROR line per event per attempt.
func TestEventStoreFailuresSpacedOut(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	var refused atomic.Int32
	gate := &finishGate{Store: s, refuse: func(_ context.Context, _ int32, outs []hookbox.Outcome) error {
		for _, o := range outs {
			if !strings.HasPrefix(o.Error, "store failed: ") {
				refused.Add(1)
				return errInjected
			}
		}
		return nil
	}}
	var logs syncbuf.Buffer
	p := worker.New(gate, worker.Options{PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { return nil }))
	p.SetPolicy("fw", worker.Policy{MaxAttempts: 1000, Timeout: 10 * time.Second})
	began := time.Now()
	start(t, p)
	var ds []hookbox.Delivery
	for i := range 20 {
		ds = append(ds, storetest.Delivery("fw", fmt.Sprint(i)))
	}
	ingest(t, s, ds...)
	p.Notify()
	awaitCount(t, "refused outcomes", &refused, 100)
	out := logs.String()
	most := 1 + int(time.Since(began)/(10*time.Second))
	if n := strings.Count(out, `level=ERROR msg="worker: record outcome"`); n < 1 || n > most {
		t.Errorf("%d ERROR lines \"worker: record outcome\" after 100 refused outcomes, want 1 (%d if ten seconds passed)", n, most)
	}
}

// claimsHalfFail is a store whose first claim that leases events returns
// them with an error, as a claim whose reads after its commit failed does
// (hookbox.Queue.Claim); later claims are the store's own.
type claimsHalfFail struct {
	dbtest.Store
	failed atomic.Bool
	after  atomic.Int32 // claims since the failed one
}

func (s *claimsHalfFail) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	evs, err := s.Store.Claim(ctx, p)
	if len(evs) > 0 && err == nil && s.failed.CompareAndSwap(false, true) {
		return evs, errInjected
	}
	if s.failed.Load() {
		s.after.Add(1)
	}
	return evs, err
}

// TestHalfFailedClaimBackLogged: after a claim that leased events but
// failed a later step (logged as "claim (what it leased is worked all the
// same)"), the next claim that works says the store answers again, also
// when it finds nothing due. Only a claim that leased events ended that
// run, so on a quiet queue the ERROR line was the last word on it.
func TestHalfFailedClaimBackLogged(t *testing.T) {
	s := &claimsHalfFail{Store: dbtest.Open(t, dbtest.SQLiteURL(t))}
	var logs syncbuf.Buffer
	p := worker.New(s, worker.Options{PollInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var done atomic.Int32
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { done.Add(1); return nil }))
	ingest(t, s, storetest.Delivery("fw", "1"))
	start(t, p)
	awaitCount(t, "events worked", &done, 1)
	awaitCount(t, "claims after the failed one", &s.after, 20)
	out := logs.String()
	const what = "worker: claim (what it leased is worked all the same)"
	if !strings.Contains(out, `level=ERROR msg="`+what+`"`) {
		t.Fatalf("no line for the claim that failed:\n%s", out)
	}
	if n := strings.Count(out, `level=INFO msg="`+what+`: the store answers again" failures=1`); n != 1 {
		t.Errorf("%d lines say claims work again after 20 that did, want 1:\n%s", n, out)
	}
}
