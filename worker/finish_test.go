package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestFinishWaitsOnlyForRunningDeliveries: a target's outcome waits for
// the outcomes of deliveries still running (Options.FinishWait), so that
// they are recorded together, and never when none is running. FinishWait
// is an hour here: a delivery running alone must still be done at once,
// and an outcome waiting for a slow delivery is recorded as soon as that
// one's is.
func TestFinishWaitsOnlyForRunningDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, FinishWait: time.Hour})
		release := make(chan struct{})
		returned := make(chan string, 10)
		p.Route("fwd", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			if ev.DeliveryID == "slow" {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			returned <- ev.DeliveryID
			return nil
		}))
		start(t, p)

		alone := ingest(t, s, storetest.Delivery("fwd", "alone"))[0]
		waitStatus(t, s, p, alone.ID, hookbox.StatusDone)
		<-returned

		slow := ingest(t, s, storetest.Delivery("fwd", "slow"))[0]
		waitStatus(t, s, p, slow.ID, hookbox.StatusProcessing)
		fast := ingest(t, s, storetest.Delivery("fwd", "fast"))[0]
		p.Notify()
		if id := <-returned; id != "fast" {
			t.Fatalf("%s returned first, want fast", id)
		}
		// The fast outcome waits while the slow delivery runs.
		time.Sleep(100 * time.Millisecond)
		if e, err := s.Event(context.Background(), fast.ID); err != nil {
			t.Fatal(err)
		} else if e.Status != hookbox.StatusProcessing {
			t.Fatalf("fast is %s while slow still runs, want its outcome waiting (processing)", e.Status)
		}
		close(release)
		waitStatus(t, s, p, fast.ID, hookbox.StatusDone)
		waitStatus(t, s, p, slow.ID, hookbox.StatusDone)
	})
}
