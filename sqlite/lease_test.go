package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// leaseTest is the lease every test here asks for, and holds the writer
// past.
const leaseTest = time.Second

// afterHeldWriter runs op while another transaction holds the one
// writer (as a work transaction whose Go handlers run long holds it),
// waits until op waits for the writer, holds it half a lease longer than
// leaseTest, and lets it go. It returns the lease end op reports and the
// time the writer was let go.
func afterHeldWriter(t *testing.T, s *Store, op func() (time.Time, error)) (end, released time.Time) {
	t.Helper()
	ctx := context.Background()
	locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	waits := s.writer.Stats().WaitCount
	type result struct {
		end time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := op()
		done <- result{end, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for s.writer.Stats().WaitCount == waits {
		if time.Now().After(deadline) {
			t.Fatal("op never waited for the writer")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(leaseTest + leaseTest/2)
	released = time.Now()
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.end, released
}

func openLeaseTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLeaseRunsFromItsWrite: a claim that waited for the writer for
// longer than the lease hands out leases that run from when they are
// written, not from when the claim was asked for: a lease over on
// arrival would be taken again by the next claim at once, beside the
// event it was given for.
func TestLeaseRunsFromItsWrite(t *testing.T) {
	s := openLeaseTest(t)
	end, released := afterHeldWriter(t, s, func() (time.Time, error) {
		evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: "waited", Limit: 1, Lease: leaseTest, Sources: []string{"s"}})
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
// waited for the writer: the lease's new end counts from the write.
func TestExtensionRunsFromItsWrite(t *testing.T) {
	ctx := context.Background()
	s := openLeaseTest(t)
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute, Sources: []string{"s"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %d events, %v", len(evs), err)
	}
	end, released := afterHeldWriter(t, s, func() (time.Time, error) {
		if err := s.ExtendLeases(ctx, "o", []int64{evs[0].ID}, time.Now().Add(leaseTest)); err != nil {
			return time.Time{}, err
		}
		e, err := s.Event(ctx, evs[0].ID)
		return e.NextAttemptAt, err
	})
	if !end.After(released) {
		t.Errorf("the extended lease ends at %s, %s before the extension could run", end.Format(time.RFC3339Nano), released.Sub(end))
	}
}
