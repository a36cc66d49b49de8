package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestShutdownChargesNoHandlerOfTheBatch: shutdown cancels the work
// while the first handler of a shared transaction runs. The handlers after
// it, in the same batch, have not started: their events must be given back
// (or left due) like the running one, never charged an attempt. With
// max_attempts 1 a charged attempt ends the event dead, unrun.
func TestShutdownChargesNoHandlerOfTheBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		pol := worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second}
		running := make(chan struct{}, 1)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxBudget: time.Minute})
		p.SetPolicy("rel", pol)
		p.Handle("rel", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if _, err := claimKey(ctx, tx, ev.DeliveryID); err != nil {
				return err
			}
			if ev.DeliveryID == "a" {
				running <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		rs := ingest(t, s, storetest.Delivery("rel", "a"), storetest.Delivery("rel", "b"))
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-running:
		case <-time.After(20 * time.Second):
			t.Fatal("the work never started")
		}
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := p.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the grace period to run out", err)
		}
		for _, r := range rs {
			e, err := s.Event(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != hookbox.StatusPending || e.Attempts != e.AttemptBase {
				t.Errorf("event %s after shutdown: %s, attempts %d, base %d, error %q; want pending with no attempt charged",
					e.DeliveryID, e.Status, e.Attempts, e.AttemptBase, e.LastError)
			}
		}
	})
}
