package worker_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestLeaseOutlivesAnOutage: an outage of the database that ends while a
// running delivery's lease still has some time left does not cost the
// lease. The pool tries a failed round of extensions again a second later
// (a quarter of the rounds' interval, at most a second), not a third of a
// lease later, by which time the lease, and with it the delivery, would be
// another process's to take. PostgreSQL only: the outage is the pool's
// connections cut, and new ones refused, by a faults.Proxy (a server that
// is down).
func TestLeaseOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	s := dbtest.Open(t, dbURL)         // the test's, never cut
	pooled := dbtest.Open(t, viaProxy) // the pool's

	// Leases of 12 s (twice the timeout), extended every 4 s.
	const lease = 12 * time.Second
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	p := worker.New(pooled, worker.Options{PollInterval: time.Hour})
	// A target that does not heed its deadline: the pool waits for it, and
	// keeps its lease meanwhile.
	p.Route("slow", worker.TargetFunc(func(context.Context, *hookbox.Event) error {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return nil
	}))
	p.SetPolicy("slow", worker.Policy{Timeout: lease / 2})
	start(t, p)
	rs := ingest(t, s, storetest.Delivery("slow", "held"))
	p.Notify()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the delivery did not start within 20 s")
	}

	// Cut right after an extension, for two thirds of the lease and a
	// little more: the rounds a third and two thirds of a lease after the
	// extension both fail, and the next regular one would come when the
	// lease ends.
	claimed := leaseEnd(t, s, time.Time{})
	last := leaseEnd(t, s, claimed)
	proxy.Cut()
	written := last.Add(-lease) // leases run from their write
	time.Sleep(time.Until(written.Add(lease*2/3 + 200*time.Millisecond)))
	proxy.Restore()

	next := leaseEnd(t, s, last)
	left := last.Sub(next.Add(-lease))
	t.Logf("extended %v before the lease would have ended", left.Round(time.Millisecond))
	if left < lease/8 {
		t.Errorf("after the outage the lease was extended %v before it would have ended, want at least %v before", left.Round(time.Millisecond), lease/8)
	}
	close(release)
	waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
	if n := runs.Load(); n != 1 {
		t.Errorf("the delivery started %d times, want once", n)
	}
}

// leaseEnd waits until the lease of the one event being worked ends at
// another time than prev, and returns that time (failing after 30 s).
func leaseEnd(t *testing.T, s dbtest.Store, prev time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var end time.Time
		err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT next_attempt_at FROM queue WHERE status = 'processing'`).Scan(&end)
		})
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			t.Fatal(err)
		case !end.Equal(prev):
			return end
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease still ends at %v after 30 s", prev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
