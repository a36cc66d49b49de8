package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

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
	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			// The lock every claim by key of o/t takes first (serialLock).
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('hookbox-strict:' || current_schema() || ':' || 'o/t'))`); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	const lease = time.Second
	type claimed struct {
		evs []hookbox.Event
		err error
	}
	done := make(chan claimed, 1)
	go func() {
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "waited", Limit: 1, Lease: lease, Sources: []string{"o/t"}, ByKey: true})
		done <- claimed{evs, err}
	}()
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited for the queue's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	conn.Release()
	time.Sleep(lease + lease/2) // the lock held past the lease
	released := time.Now()
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	c := <-done
	if c.err != nil || len(c.evs) != 1 {
		t.Fatalf("claim: %d events, %v", len(c.evs), c.err)
	}
	if end := c.evs[0].NextAttemptAt; !end.After(released) {
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
	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`, evs[0].ID); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	const lease = time.Second
	extended := make(chan error, 1)
	go func() { extended <- s.ExtendLeases(ctx, "o", []int64{evs[0].ID}, time.Now().Add(lease)) }()
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE 'UPDATE queue SET next_attempt_at%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the extension never waited for the row's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	conn.Release()
	time.Sleep(lease + lease/2) // the lock held past the lease
	released := time.Now()
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-extended; err != nil {
		t.Fatal(err)
	}
	e, err := s.Event(ctx, evs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !e.NextAttemptAt.After(released) {
		t.Errorf("the extended lease ends at %s, %s before the extension could run", e.NextAttemptAt.Format(time.RFC3339Nano), released.Sub(e.NextAttemptAt))
	}
}
