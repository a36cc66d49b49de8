package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestNotRunSaysWhy: an event claimed past its last attempt is ended dead
// without running, with the attempts it made, and its last error and
// not_run row say how it got there. One whose last attempt recorded a
// retry, and whose max_attempts was then lowered to the attempts it had
// made, says the limit is now lower, not that a worker stopped; one whose
// last attempt's worker died (its lease ended, nothing recorded) says
// that. Both for a Go handler (picked in a shared transaction, or claimed
// alone after a death) and for a target (claimed with a lease).
func TestNotRunSaysWhy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		claimOne := func(name string, id int64, now time.Time) hookbox.Event {
			t.Helper()
			evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("test-", name), Limit: 1,
				Lease: time.Minute, Sources: []string{name}, Now: now})
			if err != nil || len(evs) != 1 || evs[0].ID != id {
				t.Fatalf("claim of %s: %v, %v; want event %d", name, evs, err, id)
			}
			return evs[0]
		}
		// retried gives name's event n attempts that each recorded a retry,
		// due an hour ago, as a policy of a higher max_attempts would.
		retried := func(name string, n int) int64 {
			t.Helper()
			id := ingest(t, s, storetest.Delivery(name, "1"))[0].ID
			for range n {
				now := time.Now()
				ev := claimOne(name, id, now)
				errs, err := s.Finish(ctx, []hookbox.Outcome{{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts,
					Status: hookbox.StatusPending, RetryAt: now.Add(-time.Hour), Error: "503 from the app",
					StartedAt: now, FinishedAt: now}})
				if err != nil || errs[0] != nil {
					t.Fatalf("finish of %s: %v, %v", name, errs, err)
				}
			}
			return id
		}
		// died gives name's event n-1 retries and an nth attempt whose
		// worker died: counted, its lease ended half an hour ago, no row.
		died := func(name string, n int) int64 {
			t.Helper()
			id := retried(name, n-1)
			claimOne(name, id, time.Now().Add(-30*time.Minute))
			return id
		}
		max := fast.MaxAttempts
		ids := map[string]int64{
			"lowered-handler": retried("lowered-handler", max),
			"lowered-target":  retried("lowered-target", max),
			"died-handler":    died("died-handler", max),
			"died-target":     died("died-target", max),
		}

		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		var runs atomic.Int64
		for _, name := range []string{"lowered-handler", "died-handler"} {
			p.Handle(name, "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				runs.Add(1)
				return nil
			})
			p.SetPolicy(name, fast)
		}
		for _, name := range []string{"lowered-target", "died-target"} {
			p.Route(name, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
				runs.Add(1)
				return nil
			}))
			p.SetPolicy(name, fast)
		}
		start(t, p)

		lowered := fmt.Sprintf("max_attempts is now %d and the event has made %d attempts; not run again", max, max)
		stopped := "the last attempt's worker stopped without an outcome"
		for name, id := range ids {
			e := waitStatus(t, s, p, id, hookbox.StatusDead)
			want, notWant := lowered, stopped
			if strings.HasPrefix(name, "died") {
				want, notWant = stopped, lowered
			}
			if e.Attempts != max || !strings.Contains(e.LastError, want) || strings.Contains(e.LastError, notWant) {
				t.Errorf("%s: dead with attempts %d, last error %q; want attempts %d and an error saying %q",
					name, e.Attempts, e.LastError, max, want)
			}
			as, err := s.Attempts(ctx, id)
			if err != nil || len(as) == 0 {
				t.Fatalf("%s: attempts %v, %v", name, as, err)
			}
			if a := as[len(as)-1]; a.Outcome != hookbox.AttemptNotRun || a.Attempt != max || a.Error != e.LastError {
				t.Errorf("%s: last row %+v; want not_run, numbered %d, with the event's last error", name, a, max)
			}
		}
		if n := runs.Load(); n != 0 {
			t.Errorf("work ran %d times for events past their last attempt, want 0", n)
		}
	})
}
