package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// afterHeldLock runs op while another transaction holds a lock (taken
// by the statement lock, with args) past the lease, until a statement
// starting with waiter waits for a lock; see storetest.AfterHeld.
func afterHeldLock(t *testing.T, s *postgres.Store, lock string, args []any, waiter string, op func() (time.Time, error)) (end, released time.Time) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	return storetest.AfterHeld(t, func(held chan<- struct{}, release <-chan struct{}) error {
		return s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			if _, err := tx.ExecContext(ctx, lock, args...); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}, func() bool {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(query, $1))`, waiter).Scan(&waiting); err != nil {
			t.Error(err)
			return true
		}
		return waiting
	}, op)
}

// TestLeaseRunsFromItsWrite: a claim by key that waited for the queue's
// lock (another process's claim, held here for longer than the lease)
// hands out leases that run from when they are written, not from when
// the claim began: a lease over on arrival would be taken again by the
// next claim at once, beside the delivery it was given for.
func TestLeaseRunsFromItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	if _, err := s.Ingest(ctx, []hookbox.Delivery{keyed("1", "k")}); err != nil {
		t.Fatal(err)
	}
	// The lock every claim by key of o/t takes first (serialLock).
	const serialLock = `SELECT pg_advisory_xact_lock(hashtext('hookbox-strict:' || current_schema() || ':' || 'o/t'))`
	end, released := afterHeldLock(t, s, serialLock, nil, "SELECT pg_advisory_xact_lock", func() (time.Time, error) {
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "waited", Limit: 1, Lease: storetest.LeaseTest, Sources: []string{"o/t"}, ByKey: true})
		if err != nil || len(evs) != 1 {
			return time.Time{}, fmt.Errorf("claim: %d events, %v", len(evs), err)
		}
		return evs[0].NextAttemptAt, nil
	})
	if !end.After(released) {
		t.Errorf("the lease ends at %s, %s before the claim could run: over on arrival", end.Format(time.RFC3339Nano), released.Sub(end))
	}
}

// TestExtensionRunsFromItsWrite: the same for a lease extension that
// waited for its row's lock: the lease's new end counts from the write.
func TestExtensionRunsFromItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	if _, err := s.Ingest(ctx, []hookbox.Delivery{keyed("1", "k")}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute, Sources: []string{"o/t"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %d events, %v", len(evs), err)
	}
	rowLock := `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`
	end, released := afterHeldLock(t, s, rowLock, []any{evs[0].ID}, "UPDATE queue SET next_attempt_at", func() (time.Time, error) {
		if err := s.ExtendLeases(ctx, "o", []int64{evs[0].ID}, time.Now().Add(storetest.LeaseTest)); err != nil {
			return time.Time{}, err
		}
		e, err := s.Event(ctx, evs[0].ID)
		return e.NextAttemptAt, err
	})
	if !end.After(released) {
		t.Errorf("the extended lease ends at %s, %s before the extension could run", end.Format(time.RFC3339Nano), released.Sub(end))
	}
}
