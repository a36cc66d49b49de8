package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestPhasesPrepareOutsideTheTransaction: while a two-phase handler's
// Prepare waits on an outside call, the store takes other writes (on
// SQLite: nobody holds the only write lock); Apply then commits its write
// with the event's done, with what Prepare returned. A failing Prepare is
// retried and its Apply never runs.
func TestPhasesPrepareOutsideTheTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var flakyPrepares, applies atomic.Int64
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("ph", fast)
		p.HandlePhases("ph", "", worker.TwoPhase(
			func(ctx context.Context, ev *hookbox.Event) (string, error) {
				if ev.DeliveryID == "flaky" && flakyPrepares.Add(1) == 1 {
					return "", errors.New("service unavailable")
				}
				if ev.DeliveryID == "slow" {
					started <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
						return "", ctx.Err()
					}
				}
				return "prepared-" + ev.DeliveryID, nil
			},
			func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, prepared string) error {
				applies.Add(1)
				_, err := claimKey(ctx, tx, prepared)
				return err
			}))
		start(t, p)
		slow := ingest(t, s, storetest.Delivery("ph", "slow"))[0].ID
		<-started
		// Prepare is waiting: a write must go through now.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := s.Ingest(wctx, []hookbox.Delivery{storetest.Delivery("other", "x")}); err != nil {
			t.Fatalf("ingest while a Prepare waits: %v", err)
		}
		close(release)
		waitStatus(t, s, p, slow, hookbox.StatusDone)
		if n := keyCount(t, s, p, "prepared-slow"); n != 1 {
			t.Errorf("Apply's write with Prepare's value: %d rows, want 1", n)
		}

		flaky := ingest(t, s, storetest.Delivery("ph", "flaky"))[0].ID
		e := waitStatus(t, s, p, flaky, hookbox.StatusDone)
		if e.Attempts != 2 {
			t.Errorf("flaky: done after %d attempts, want 2", e.Attempts)
		}
		if applies.Load() != 2 {
			t.Errorf("Apply ran %d times, want 2 (once per successful Prepare)", applies.Load())
		}
	})
}

// TestLeasesExtendedWhileStopping: after Stop is called, work still running
// keeps its lease extended until it returns, so no other process can claim
// the event meanwhile.
func TestLeasesExtendedWhileStopping(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		started := make(chan struct{})
		release := make(chan struct{})
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("slow", worker.Policy{MaxAttempts: 3, Timeout: 300 * time.Millisecond})
		p.Route("slow", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			close(started)
			<-release // ignores its timeout, as a stuck call would
			return nil
		}))
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		id := ingest(t, s, storetest.Delivery("slow", "1"))[0].ID
		p.Notify()
		<-started
		first, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			stopped <- p.Stop(sctx)
		}()
		// The lease (1s) must be pushed well past its first end while
		// Stop waits for the running target.
		deadline := time.Now().Add(10 * time.Second)
		for {
			e, err := s.Event(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if e.NextAttemptAt.After(first.NextAttemptAt.Add(time.Second)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease end stayed at %v while stopping", e.NextAttemptAt)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Past the first lease end, nobody else can claim it.
		other, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "other", Limit: 1, Lease: time.Minute, Sources: []string{"slow"}})
		if err != nil || len(other) != 0 {
			t.Fatalf("claimed by another worker while still running: %v %v", other, err)
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if e, _ := s.Event(ctx, id); e.Status != hookbox.StatusDone {
			t.Fatalf("status %s after Stop, want done", e.Status)
		}
	})
}

// TestNotifyDuringStart: Notify may be called from ingest at any time,
// also while the pool starts (the race detector watches this one).
func TestNotifyDuringStart(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	p := worker.New(s, worker.Options{TxWorkers: 4})
	p.Handle("n", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error { return nil })
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				p.Notify()
			}
		}
	}()
	start(t, p)
	id := ingest(t, s, storetest.Delivery("n", "1"))[0].ID
	waitStatus(t, s, p, id, hookbox.StatusDone)
	close(stop)
	<-done
}

// TestApplyOnlyBesideTwoPhase: on a source with a two-phase handler, an
// apply-only handler (Handle) of another event type runs, as Apply alone,
// in the transaction that marks its event done. (It was skipped and its
// event marked done unworked: every event of such a source comes to the
// transaction with what a Prepare returned, and that case was taken for a
// two-phase handler without Apply.)
func TestApplyOnlyBesideTwoPhase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var prepares, applies, handled atomic.Int64
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("mixed", fast)
		p.HandlePhases("mixed", "order.paid", worker.TwoPhase(
			func(context.Context, *hookbox.Event) (string, error) { prepares.Add(1); return "paid", nil },
			func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, v string) error {
				applies.Add(1)
				_, err := claimKey(ctx, tx, v+"-"+ev.DeliveryID)
				return err
			}))
		p.Handle("mixed", "order.refunded", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			handled.Add(1)
			_, err := claimKey(ctx, tx, "refunded-"+ev.DeliveryID)
			return err
		})
		start(t, p)
		paid, refunded := storetest.Delivery("mixed", "p1"), storetest.Delivery("mixed", "r1")
		paid.EventType, refunded.EventType = "order.paid", "order.refunded"
		rs := ingest(t, s, paid, refunded)
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
		}
		if prepares.Load() != 1 || applies.Load() != 1 || handled.Load() != 1 {
			t.Errorf("Prepare ran %d times, Apply %d, the apply-only handler %d; want once each",
				prepares.Load(), applies.Load(), handled.Load())
		}
		if n := keyCount(t, s, p, "refunded-r1"); n != 1 {
			t.Errorf("the apply-only handler's write: %d rows, want 1", n)
		}
	})
}

// TestApplyOutlivesItsBatchDeadline: an Apply is bounded by its source's
// timeout, not by what is left of its batch's: one that runs past the
// batch's deadline (shortened here to 200 ms; 30 s by default, which a
// batch of slow Applies can pass) still writes, with its context, and its
// event is done. It was handed a context already over, failed, and went
// round to Prepare again, on every attempt.
func TestApplyOutlivesItsBatchDeadline(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.WithApplyBatchTimeout(worker.Options{PollInterval: 10 * time.Millisecond}, 200*time.Millisecond))
		p.SetPolicy("slow-apply", fast)
		p.HandlePhases("slow-apply", "", worker.TwoPhase(
			func(context.Context, *hookbox.Event) (string, error) { return "applied", nil },
			func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, v string) error {
				time.Sleep(400 * time.Millisecond) // the work that outlasts the batch's deadline
				_, err := claimKey(ctx, tx, v+"-"+ev.DeliveryID)
				return err
			}))
		start(t, p)
		id := ingest(t, s, storetest.Delivery("slow-apply", "a1"))[0].ID
		if e := waitStatus(t, s, p, id, hookbox.StatusDone); e.Attempts != 1 {
			t.Errorf("done after %d attempts, want 1", e.Attempts)
		}
		if n := keyCount(t, s, p, "applied-a1"); n != 1 {
			t.Errorf("the Apply's write: %d rows, want 1", n)
		}
	})
}
