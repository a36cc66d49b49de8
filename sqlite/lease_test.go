package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// TestLeaseRunsFromItsWrite: a claim that waited for the one writer (held
// here, as a work transaction whose Go handlers run long holds it, for
// longer than the lease) hands out leases that run from when they are
// written, not from when the claim was asked for: a lease over on arrival
// would be taken again by the next claim at once, beside the event it was
// given for.
func TestLeaseRunsFromItsWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
		t.Fatal(err)
	}
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
	const lease = time.Second
	type claimed struct {
		evs []hookbox.Event
		err error
	}
	done := make(chan claimed, 1)
	go func() {
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "waited", Limit: 1, Lease: lease, Sources: []string{"s"}})
		done <- claimed{evs, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for s.writer.Stats().WaitCount == waits {
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited for the writer")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(lease + lease/2) // the writer held past the lease
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
// waited for the writer: the lease's new end counts from the write.
func TestExtensionRunsFromItsWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute, Sources: []string{"s"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %d events, %v", len(evs), err)
	}
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
	const lease = time.Second
	extended := make(chan error, 1)
	go func() { extended <- s.ExtendLeases(ctx, "o", []int64{evs[0].ID}, time.Now().Add(lease)) }()
	deadline := time.Now().Add(20 * time.Second)
	for s.writer.Stats().WaitCount == waits {
		if time.Now().After(deadline) {
			t.Fatal("the extension never waited for the writer")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(lease + lease/2) // the writer held past the lease
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
