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

// TestStoreFailureGivesTheAttemptBack: when the database ends the
// connection of the transaction a handler runs in (a two-phase handler's
// Apply, or an apply-only handler), nothing of the attempt was applied,
// and the event is not charged for it on that one failure: with
// max_attempts 1 it runs again, alone, and is done. It used to be charged
// at once, and went dead. Work that ends its connection every time still
// ends dead, after a bounded number of runs, instead of running uncounted
// for ever, also when every connection of the pool is cut each time.
// PostgreSQL only: the handler ends its own connection
// (pg_terminate_backend), or a faults.Proxy cuts them all.
func TestStoreFailureGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		phased bool
		cuts   int32
		status hookbox.Status
		proxy  bool // every connection cut, not just the transaction's
	}{
		{"apply, ended once", true, 1, hookbox.StatusDone, false},
		{"apply, ended every run", true, 1 << 30, hookbox.StatusDead, false},
		{"handler, ended once", false, 1, hookbox.StatusDone, false},
		{"handler, ended every run", false, 1 << 30, hookbox.StatusDead, false},
		{"handler, all cut every run", false, 1 << 30, hookbox.StatusDead, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.URL(t)
			proxy, viaProxy := faults.URLProxyFor(t, dbURL)
			s := dbtest.Open(t, dbURL)
			pooled := dbtest.Open(t, viaProxy)
			var runs atomic.Int32
			p := worker.New(pooled, worker.Options{PollInterval: 10 * time.Millisecond})
			p.SetPolicy("flaky", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
			apply := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				if _, err := claimKey(ctx, tx, "flaky-"+ev.DeliveryID); err != nil {
					return err
				}
				if runs.Add(1) <= c.cuts && c.proxy {
					proxy.Cut() // the pool's connections, all at once
					proxy.Restore()
					return nil
				}
				if runs.Add(0) <= c.cuts {
					// The server ends this connection, and with it the
					// transaction; the pool's other connections live on.
					_, err := tx.ExecContext(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
					return err
				}
				return nil
			}
			if c.phased {
				p.HandlePhases("flaky", "", worker.Phases{
					Prepare: func(context.Context, *hookbox.Event) (any, error) { return nil, nil },
					Apply: func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, _ any) error {
						return apply(ctx, tx, ev)
					}})
			} else {
				p.Handle("flaky", "", apply)
			}
			start(t, p)
			id := ingest(t, s, storetest.Delivery("flaky", "1"))[0].ID
			p.Notify()
			e := waitFinished(t, s, p, id)
			if e.Status != c.status || runs.Load() > 8 || c.status == hookbox.StatusDone && runs.Load() != 2 {
				t.Errorf("%s: %s after %d runs, error %q; want %s (after 2 runs when done, at most 8)",
					c.name, e.Status, runs.Load(), e.LastError, c.status)
			}
		})
	}
}
