package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// finishGate is the real store, but its Finish first asks refuse, with
// the call's number (from 1) and the outcomes: an error it returns is
// Finish's, and nothing is recorded, as in a blip of the database or a
// StoreTimeout; nil lets the call through.
type finishGate struct {
	dbtest.Store
	calls  atomic.Int32
	refuse func(ctx context.Context, call int32, outs []hookbox.Outcome) error
}

func (s *finishGate) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	if err := s.refuse(ctx, s.calls.Add(1), outs); err != nil {
		return nil, err
	}
	return s.Store.Finish(ctx, outs)
}

var errInjected = errors.New("injected: the store failed to record the outcomes")

// failsOnce refuses the first Finish.
func failsOnce(_ context.Context, call int32, _ []hookbox.Outcome) error {
	if call == 1 {
		return errInjected
	}
	return nil
}

// TestTargetOutcomeRecordedAfterABlip: when the store fails once to
// record a target's outcome, the outcome is tried again at once and
// recorded: the event is done after one run. It was given back and run
// again (see TestTargetOutcomeNotRecordedGivesTheAttemptBack).
func TestTargetOutcomeRecordedAfterABlip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var runs atomic.Int32
		p := worker.New(&finishGate{Store: s, refuse: failsOnce}, worker.Options{PollInterval: 20 * time.Millisecond})
		p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error {
			runs.Add(1)
			return nil // delivered
		}))
		p.SetPolicy("fw", worker.Policy{MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("fw", "1"))[0].ID
		p.Notify()
		e := waitFinished(t, s, p, id)
		if e.Status != hookbox.StatusDone || runs.Load() != 1 {
			t.Errorf("%s after %d runs, error %q; want done after 1 run", e.Status, runs.Load(), e.LastError)
		}
	})
}

// TestTargetOutcomeNotRecordedGivesTheAttemptBack: when the store fails
// to record a target's outcome, and to record the release that follows
// on its first try, the attempt is given back all the same: with
// max_attempts 1, the event runs once more and is done. Left leased, the
// event was claimed again once its lease ended and, its one attempt used
// up, marked dead as if its worker had died, though the target had
// delivered it.
func TestTargetOutcomeNotRecordedGivesTheAttemptBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var runs atomic.Int32
		// During the target's first run, no outcome is recorded, nor
		// the first release that follows, as in an outage that breaks
		// every connection for a moment.
		var releaseFailed atomic.Bool
		gate := &finishGate{Store: s, refuse: func(_ context.Context, _ int32, outs []hookbox.Outcome) error {
			if runs.Load() == 1 && (!outs[0].Released || releaseFailed.CompareAndSwap(false, true)) {
				return errInjected
			}
			return nil
		}}
		p := worker.New(gate, worker.Options{PollInterval: 20 * time.Millisecond})
		p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error {
			runs.Add(1)
			return nil // delivered
		}))
		p.SetPolicy("fw", worker.Policy{MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("fw", "1"))[0].ID
		p.Notify()
		e := waitFinished(t, s, p, id)
		if e.Status != hookbox.StatusDone || runs.Load() != 2 {
			t.Errorf("%s after %d runs, error %q; want done after 2 runs (the first one's outcome lost)", e.Status, runs.Load(), e.LastError)
		}
	})
}

// TestStoreFailureAgainWaitsItsBackoff: the second store failure in a row
// counts as an attempt (see TestTargetOutcomeNotRecordedGivesTheAttemptBack),
// and such an attempt waits out its backoff like any other failed one. It
// was due again in a second, so a target whose outcomes the store could
// not record ran about once a second until its attempts were used up.
func TestStoreFailureAgainWaitsItsBackoff(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var runs atomic.Int32
		// No target's outcome is recorded, only the releases that follow
		// (their error starts "store failed: ").
		gate := &finishGate{Store: s, refuse: func(_ context.Context, _ int32, outs []hookbox.Outcome) error {
			for _, o := range outs {
				if !strings.HasPrefix(o.Error, "store failed: ") {
					return errInjected
				}
			}
			return nil
		}}
		p := worker.New(gate, worker.Options{PollInterval: 10 * time.Millisecond})
		p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error {
			runs.Add(1)
			return nil
		}))
		p.SetPolicy("fw", worker.Policy{MaxAttempts: 5, Timeout: 300 * time.Millisecond, BackoffMin: time.Hour, BackoffMax: 2 * time.Hour})
		start(t, p)
		id := ingest(t, s, storetest.Delivery("fw", "1"))[0].ID
		p.Notify()
		deadline := time.Now().Add(20 * time.Second)
		for {
			e, err := s.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if runs.Load() >= 2 && e.Status == hookbox.StatusPending && e.LeaseOwner == "" && e.Attempts-e.AttemptBase >= 1 {
				if wait := time.Until(e.NextAttemptAt); wait < 50*time.Minute {
					t.Fatalf("after %d runs the event is due again in %v (error %q); want its backoff (1 h to 2 h)", runs.Load(), wait, e.LastError)
				}
				if n := runs.Load(); n != 2 {
					t.Fatalf("ran %d times, want 2 (the first store failure given back, the second counted and waiting)", n)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: %d runs, event %s leased by %q, attempts %d", runs.Load(), e.Status, e.LeaseOwner, e.Attempts)
			}
			p.Notify()
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestStopNotHeldByTriesAgain: the tries again after a failed outcome
// (and the release after them) share one short budget, so a store that
// stops answering holds a pool's Stop about a second, whatever the store
// timeout: each try had a store timeout of its own, and with an hour's
// timeout Stop waited hours.
func TestStopNotHeldByTriesAgain(t *testing.T) {
	// The first Finish fails at once, the later ones hang until their
	// context ends: a store that went away mid-outcome.
	store := &finishGate{Store: dbtest.Open(t, dbtest.SQLiteURL(t)), refuse: func(ctx context.Context, call int32, _ []hookbox.Outcome) error {
		if call == 1 {
			return errInjected
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	if !stopsWithinAMinute(t, store, 2) { // once the tries again have begun
		t.Fatalf("Stop still waiting after a minute: the tries again each wait the store's hour (%d Finish calls)", store.calls.Load())
	}
}

// stopsWithinAMinute runs one event of a target through a pool on store,
// whose StoreTimeout is an hour, waits until store has had calls Finish
// calls, stops the pool with a second's context, and reports whether
// Stop returned within a minute.
func stopsWithinAMinute(t *testing.T, store *finishGate, calls int32) bool {
	t.Helper()
	ran := make(chan struct{})
	p := worker.New(store, worker.Options{PollInterval: 20 * time.Millisecond, StoreTimeout: time.Hour})
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error {
		close(ran)
		return nil
	}))
	p.SetPolicy("fw", worker.Policy{MaxAttempts: 3, Timeout: time.Minute})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ingest(t, store.Store, storetest.Delivery("fw", "1"))
	p.Notify()
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the target never ran")
	}
	for deadline := time.Now().Add(20 * time.Second); store.calls.Load() < calls; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d Finish calls after 20 s, want %d", store.calls.Load(), calls)
		}
	}
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.Stop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
		return true
	case <-time.After(60 * time.Second):
		return false
	}
}

// stopRecordHangs is a store whose writes that record a pool's stop
// (DropMark, WorkerStopped) wait until their context ends: a store that
// stopped answering as the pool stops.
type stopRecordHangs struct {
	dbtest.Store
	calls atomic.Int32
}

func (s *stopRecordHangs) DropMark(ctx context.Context, _ string) error {
	s.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (s *stopRecordHangs) WorkerStopped(ctx context.Context, _ string) error {
	s.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestStopNotHeldByItsRecord: when the store stops answering as the pool
// stops, recording the stop (dropping each slot's mark, deleting the
// pool's record) shares one budget and ends at the first failure. Each
// write waited its own StoreTimeout (an hour here; 15 s each for serve,
// so that a stop during a PostgreSQL outage passed systemd's 60 s).
func TestStopNotHeldByItsRecord(t *testing.T) {
	store := &stopRecordHangs{Store: dbtest.Open(t, dbtest.SQLiteURL(t))}
	p := worker.New(store, worker.Options{PollInterval: 20 * time.Millisecond, StoreTimeout: time.Hour, Concurrency: 4})
	p.Route("fw", worker.TargetFunc(func(context.Context, *hookbox.Event) error { return nil }))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		p.Stop(context.Background())
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatalf("Stop still waiting after a minute: each write recording it waits the store's hour (%d so far)", store.calls.Load())
	}
	if n := store.calls.Load(); n != 1 {
		t.Errorf("%d writes recording the stop were tried, want 1: after the first failed, the others wait in vain", n)
	}
}

// TestStopNotHeldByAHangingOutcome: a store that stops answering while a
// target's outcome is recorded holds Stop a second past its context, no
// longer: the recording is abandoned with the work. The batch recording
// outcomes ran on its own StoreTimeout (an hour here, 15 s for serve),
// and Stop waited for it after it had abandoned the work.
func TestStopNotHeldByAHangingOutcome(t *testing.T) {
	store := &finishGate{Store: dbtest.Open(t, dbtest.SQLiteURL(t)), refuse: func(ctx context.Context, _ int32, _ []hookbox.Outcome) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	if !stopsWithinAMinute(t, store, 1) {
		t.Fatal("Stop still waiting after a minute for an outcome the store never answers (its StoreTimeout is an hour)")
	}
}
