package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestStopAbandonsWorkThatIgnoresItsContext: Stop returns ctx.Err() soon
// after its context ends, also while an apply-only handler and a target
// ignore their cancelled contexts. The handler's transaction is rolled
// back from outside (SQLite takes other writes at once), its writes, the
// one made before Stop and the one after, never commit, its event is not
// marked done, and the target's late success is not recorded: the next
// pool works both events, the target's once its lease ends. Stop used to
// wait for such work for ever, and hookbox serve's shutdown with it.
func TestStopAbandonsWorkThatIgnoresItsContext(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		release := make(chan struct{})
		var releaseOnce sync.Once
		free := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(free)
		handlerIn, targetIn := make(chan struct{}), make(chan struct{})
		late := make(chan error, 1)
		// Lease: a second (twice the timeout, at least a second).
		pol := worker.Policy{MaxAttempts: 3, Timeout: 100 * time.Millisecond}
		p.SetPolicy("stuck", pol)
		p.Handle("stuck", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if _, err := claimKey(ctx, tx, "stuck-before"); err != nil {
				return err
			}
			close(handlerIn)
			<-release // ignores ctx
			_, err := claimKey(context.Background(), tx, "stuck-after")
			late <- err
			return nil
		})
		p.SetPolicy("hung", pol)
		p.Route("hung", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			close(targetIn)
			<-release // ignores ctx
			return nil
		}))
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The target first: the handler holds the claiming loop.
		hung := ingest(t, s, storetest.Delivery("hung", "1"))[0]
		p.Notify()
		<-targetIn
		stuck := ingest(t, s, storetest.Delivery("stuck", "1"))[0]
		p.Notify()
		<-handlerIn

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- p.Stop(ctx) }()
		select {
		case err := <-stopped:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Stop = %v, want its context's error", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Stop still waiting 30 s after its context ended, for work that ignores it")
		}
		// On SQLite the handler's transaction held the only write lock.
		ictx, icancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer icancel()
		if _, err := s.Ingest(ictx, []hookbox.Delivery{storetest.Delivery("other", "1")}); err != nil {
			t.Errorf("ingest after Stop: %v (the abandoned handler's transaction still open?)", err)
		}

		free()
		if err := <-late; err == nil {
			t.Errorf("the abandoned handler wrote through its tx after Stop returned")
		}
		worker.Quiet(p) // the abandoned work has returned
		for _, key := range []string{"stuck-before", "stuck-after"} {
			if n := keyCount(t, s, p, key); n != 0 {
				t.Errorf("the abandoned handler's write %s committed", key)
			}
		}
		if e, err := s.Event(context.Background(), stuck.ID); err != nil || e.Status == hookbox.StatusDone {
			t.Errorf("abandoned handler's event: %+v, %v; want it not done", e, err)
		}
		if e, err := s.Event(context.Background(), hung.ID); err != nil || e.Status != hookbox.StatusProcessing {
			t.Errorf("abandoned target's event: %+v, %v; want it left processing, its lease to end", e, err)
		}

		// The next pool works both.
		q := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		q.SetPolicy("stuck", pol)
		q.Handle("stuck", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			_, err := claimKey(ctx, tx, "stuck-again")
			return err
		})
		q.SetPolicy("hung", pol)
		q.Route("hung", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
		start(t, q)
		waitStatus(t, s, q, stuck.ID, hookbox.StatusDone)
		waitStatus(t, s, q, hung.ID, hookbox.StatusDone)
		if n := keyCount(t, s, q, "stuck-again"); n != 1 {
			t.Errorf("the handler's write on its second run: %d, want 1", n)
		}
	})
}
