package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestShutdownGivesTheAttemptBack: an attempt that shutdown cuts short
// (the grace period ran out) is released without using up the event's
// retry budget, so the next process runs the event again, even when the
// cut attempt was its last. It used to be counted: with max_attempts 1 the
// next process marked the event dead, unrun, as if a process had died of
// it. Each way of running work is covered: a target, a two-phase handler's
// Prepare (claimed with a lease, finished with Queue.Finish) and an
// apply-only handler (picked in the store's transaction, finished with
// WorkTx.FinishPicked). The release is logged as one, at info; it used to
// be logged as a failed attempt, at warn, with a negative retry_in.
func TestShutdownGivesTheAttemptBack(t *testing.T) {
	kinds := map[string]func(p *worker.Pool, source string, run func(ctx context.Context) error){
		"target": func(p *worker.Pool, source string, run func(ctx context.Context) error) {
			p.Route(source, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return run(ctx) }))
		},
		"prepare": func(p *worker.Pool, source string, run func(ctx context.Context) error) {
			p.HandlePhases(source, "", worker.Phases{Prepare: func(ctx context.Context, ev *hookbox.Event) (any, error) {
				return nil, run(ctx)
			}})
		},
		"handler": func(p *worker.Pool, source string, run func(ctx context.Context) error) {
			p.Handle(source, "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error { return run(ctx) })
		},
	}
	for kind, register := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				testShutdownGivesTheAttemptBack(t, dbURL, register)
			})
		})
	}
}

func testShutdownGivesTheAttemptBack(t *testing.T, dbURL string, register func(*worker.Pool, string, func(context.Context) error)) {
	s := dbtest.Open(t, dbURL)
	ctx := context.Background()
	pol := worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second}
	var runs atomic.Int64
	running := make(chan struct{}, 1)

	// The first process: its work waits until shutdown cancels it.
	var logs syncbuf.Buffer
	first := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	first.SetPolicy("rel", pol)
	register(first, "rel", func(ctx context.Context) error {
		runs.Add(1)
		running <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := ingest(t, s, storetest.Delivery("rel", "1"))[0].ID
	first.Notify()
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the work never started")
	}
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := first.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the grace period to run out", err)
	}
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != hookbox.StatusPending || e.LeaseOwner != "" || e.NextAttemptAt.After(time.Now()) ||
		e.Attempts != 1 || e.AttemptBase != 1 || !strings.HasPrefix(e.LastError, "cancelled by shutdown") {
		t.Errorf("after shutdown: status %s, attempts %d, base %d, owner %q, due %v, error %q; want pending, unleased, due now, attempt 1 given back",
			e.Status, e.Attempts, e.AttemptBase, e.LeaseOwner, e.NextAttemptAt, e.LastError)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the work ran %d times in the stopping process, want 1", n)
	}
	// Stop has waited for the work and its outcome, so the log is complete.
	if out := logs.String(); strings.Contains(out, "attempt failed") || strings.Contains(out, "retry_in") ||
		!strings.Contains(out, `level=INFO msg="released at shutdown"`) {
		t.Errorf("the stopping process logged:\n%s\nwant the release at info, as a release, without retry_in", out)
	}

	// The next process runs it, as the event's one counted attempt.
	next := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	next.SetPolicy("rel", pol)
	register(next, "rel", func(context.Context) error { runs.Add(1); return nil })
	start(t, next)
	e = waitFinished(t, s, next, id)
	if e.Status != hookbox.StatusDone || e.Attempts != 2 || e.AttemptBase != 1 || runs.Load() != 2 {
		t.Errorf("after restart: %s, attempts %d, base %d, runs %d, error %q; want done, 2, 1, 2",
			e.Status, e.Attempts, e.AttemptBase, runs.Load(), e.LastError)
	}
	as, err := s.Attempts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].Attempt != 1 || as[0].Outcome != hookbox.AttemptReleased ||
		!strings.HasPrefix(as[0].Error, "cancelled by shutdown") || as[1].Attempt != 2 || as[1].Outcome != hookbox.AttemptDone {
		t.Errorf("attempts = %+v; want 1 released by shutdown, 2 done", as)
	}
}

// waitFinished waits until event id is done or dead, failing after 20s.
func waitFinished(t *testing.T, s dbtest.Store, p *worker.Pool, id int64) hookbox.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDone || e.Status == hookbox.StatusDead {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s after 20s, want it finished", id, e.Status)
		}
		p.Notify()
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWorkThatStopsItsProcessGoesDead: an event whose work gets its own
// process stopped (a deploy script that restarts hookbox, a handler that
// makes the liveness probe fail) is cut short by every shutdown. Only the
// first cut in a row is given back; the next ones count, so the event
// still ends dead after max_attempts, saying why, instead of running at
// every start for ever.
func TestWorkThatStopsItsProcessGoesDead(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	id := ingest(t, s, storetest.Delivery("deploy", "1"))[0].ID
	pol := worker.Policy{MaxAttempts: 2, Timeout: 10 * time.Second}
	for round := 1; ; round++ {
		if round > pol.MaxAttempts+1 {
			t.Fatalf("max_attempts %d: not dead after %d processes, each stopped by the event's work", pol.MaxAttempts, round-1)
		}
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("deploy", pol)
		stopped := make(chan struct{})
		p.Route("deploy", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			go func() { // "systemctl restart hookbox"
				sctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				p.Stop(sctx)
				close(stopped)
			}()
			<-ctx.Done() // the script waits for the restart
			return ctx.Err()
		}))
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-stopped
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDead {
			if !strings.Contains(e.LastError, "cut short by a shutdown again") {
				t.Errorf("dead with %q, want the reason", e.LastError)
			}
			return
		}
	}
}

// TestRefusalDuringShutdownIsKept: a permanent refusal (a 410, say) that
// comes back while shutdown is cancelling the work is a judgement, not an
// attempt cut short: the event goes dead as it would have at any other
// time, instead of being given back and run once more by the next process.
func TestRefusalDuringShutdownIsKept(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("gone", worker.Policy{MaxAttempts: 5, Timeout: 10 * time.Second})
		running := make(chan struct{}, 1)
		p.Route("gone", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			running <- struct{}{}
			<-ctx.Done()
			return worker.Permanent(errors.New("410 Gone"))
		}))
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		id := ingest(t, s, storetest.Delivery("gone", "1"))[0].ID
		p.Notify()
		select {
		case <-running:
		case <-time.After(20 * time.Second):
			t.Fatal("the work never started")
		}
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		p.Stop(sctx)
		e, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != hookbox.StatusDead || e.AttemptBase != 0 || strings.HasPrefix(e.LastError, "cancelled by shutdown") {
			t.Errorf("after a refusal during shutdown: %s, base %d, error %q; want dead, the attempt counted", e.Status, e.AttemptBase, e.LastError)
		}
	})
}
