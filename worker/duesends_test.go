package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestApplySendClaimed: a send a two-phase handler's Apply records
// (effect.RecordSend) is claimed once that Apply commits, with the pool
// polling once an hour. The claim loop reuses its answer of which queues
// have events due until something may have stored events; the Apply's
// transaction stored one in a queue that answer did not list (the send's
// source had nothing due when it was read), as a Go handler's
// transaction may, after which runTx marks the answer stale. The
// phased event ends done, which only wakes the pool: without the Apply
// marking the answer stale, the send waited for the hour's poll.
func TestApplySendClaimed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{Concurrency: 4, PollInterval: time.Hour})
		p.HandlePhases("app", "", worker.Phases{
			Prepare: func(ctx context.Context, ev *hookbox.Event) (any, error) { return nil, nil },
			Apply: func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, _ any) error {
				_, err := effect.RecordSend(ctx, tx, "email", ev.DeliveryID, []byte(`{}`))
				return err
			},
		})
		sends := &deliveryCounter{runs: map[int64]int{}}
		p.Route(effect.SendSource("email"), sends)
		rs := ingest(t, s, storetest.Delivery("app", "1"))
		start(t, p)
		awaitDone(t, s, rs[0].ID, 20*time.Second)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if events, _ := sends.count(); events == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the send the Apply recorded was not delivered in 20 s")
			}
		}
	})
}
