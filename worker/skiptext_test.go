package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestSkipOfAHandlerErrorLikeASkip: a Go handler's error that reads as a
// skip's last error ("skipped by an operator: x") kills its delivery,
// which holds its order key; Ops.Skip then skips it: it releases the key
// and writes its skip row. Skip judged a delivery skipped by its last
// error's first words, which a handler writes, and so reported this one
// as already skipped, changing nothing, and the key stayed held.
func TestSkipOfAHandlerErrorLikeASkip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		ingest(t, s, storetest.Keyed("sk", "app", "1", "cust-1"))
		evs, err := s.Events(ctx, hookbox.Filter{Source: "sk/app"})
		if err != nil || len(evs) != 1 {
			t.Fatalf("the delivery: %v, %v", evs, err)
		}
		id := evs[0].ID
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.HandlePhases("sk/app", "", worker.Phases{Prepare: func(context.Context, *hookbox.Event) (any, error) {
			return nil, worker.Permanent(errors.New("skipped by an operator: x"))
		}})
		p.SetPolicy("sk/app", fast)
		p.SetControls("sk/app", worker.Controls{ByKey: true})
		start(t, p)
		if e := waitStatus(t, s, p, id, hookbox.StatusDead); e.LastError != "skipped by an operator: x" {
			t.Fatalf("last error %q, want the handler's", e.LastError)
		}
		res, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: "customer deleted", Via: "test", Key: routing.NoValueKey})
		if err != nil || res.Already || res.Released != "cust-1" {
			t.Fatalf("skip = %+v, %v; want key cust-1 released", res, err)
		}
		e, err := s.Event(ctx, id)
		if err != nil || e.LastError != hookbox.SkipError("test", "customer deleted", "cust-1") || e.OrderKey != routing.NoValueKey("1") {
			t.Fatalf("after the skip: %+v, %v", e, err)
		}
		as, err := s.Attempts(ctx, id)
		if err != nil || len(as) == 0 || as[len(as)-1].Outcome != hookbox.AttemptSkip {
			t.Fatalf("attempts after the skip: %+v, %v; want a skip row last", as, err)
		}
		if res, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: "again", Key: routing.NoValueKey}); err != nil || !res.Already {
			t.Fatalf("second skip = %+v, %v; want Already", res, err)
		}
	})
}
