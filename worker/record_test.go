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

// finishFailsOnce is a store whose first Finish fails, as a blip of the
// database or a StoreTimeout would, with nothing recorded.
type finishFailsOnce struct {
	dbtest.Store
	calls atomic.Int32
}

func (s *finishFailsOnce) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	if s.calls.Add(1) == 1 {
		return nil, errors.New("injected: the store failed to record the outcomes")
	}
	return s.Store.Finish(ctx, outs)
}

// TestTargetOutcomeNotRecordedGivesTheAttemptBack: when the store fails
// to record a target's outcome, the attempt is given back, as when an
// Apply cannot commit: with max_attempts 1, the event runs once more and
// is done. The event used to stay leased, unrecorded, until its lease
// ended; it was then claimed again and, its one attempt used up, marked
// dead as if its worker had died, though the target had delivered it.
func TestTargetOutcomeNotRecordedGivesTheAttemptBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var runs atomic.Int32
		p := worker.New(&finishFailsOnce{Store: s}, worker.Options{PollInterval: 20 * time.Millisecond})
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
