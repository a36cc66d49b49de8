package worker_test

import (
	"bytes"
	"context"
	"runtime"
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
