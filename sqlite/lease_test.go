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

// afterHeldWriter runs op while another transaction holds the one writer
// (as a work transaction whose Go handlers run long holds it) past the
// lease; see storetest.AfterHeld.
func afterHeldWriter(t *testing.T, s *Store, op func() (time.Time, error)) (end, released time.Time) {
	t.Helper()
	var waits int64
	return storetest.AfterHeld(t, func(held chan<- struct{}, release <-chan struct{}) error {
		return s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			waits = s.writer.Stats().WaitCount
			close(held)
			<-release
			return nil
		})
	}, func() bool { return s.writer.Stats().WaitCount > waits }, op)
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
		evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: "waited", Limit: 1, Lease: storetest.LeaseTest, Sources: []string{"s"}})
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

// TestRunningKeyNotUTF8: an order key stored before keys had to be UTF-8
// (hookbox.CheckStorable refuses one now, and routing hashes it) holds
// whatever bytes a sender put in a header; one that is not UTF-8 is still
// recognized as running (ClaimParams.RunningKeys) when its delivery's
// lease has ended.
func TestRunningKeyNotUTF8(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "k\xff\xfe"
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Keyed("o", "t", "1", "k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE events SET order_key = ? WHERE source = 'o/t'`, key); err != nil {
		t.Fatal(err)
	}
	claim := func(p hookbox.ClaimParams) []hookbox.Event {
		t.Helper()
		p.Owner, p.Limit, p.Lease, p.Sources, p.ByKey = fmt.Sprint("o", p.Now.UnixNano()), 1, time.Minute, []string{"o/t"}, true
		evs, err := s.Claim(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if evs := claim(hookbox.ClaimParams{}); len(evs) != 1 || evs[0].OrderKey != key {
		t.Fatalf("first claim: %+v", evs)
	}
	later := time.Now().Add(2 * time.Minute) // the lease of one minute is over
	if evs := claim(hookbox.ClaimParams{Now: later, RunningKeys: []string{key}}); len(evs) != 0 {
		t.Fatalf("claimed the delivery of running key %q again", evs[0].OrderKey)
	}
}
