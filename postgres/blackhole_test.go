package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestIngestRollbackOnADeadNetwork: an ingest transaction that is open
// when the network to the server starts dropping every packet is rolled
// back within an ingest step's time, not when the network comes back. The
// receiver rolls back the transaction filling behind a failed commit, and
// the deliveries queued behind it wait for that rollback: a rollback that
// waited for the server's answer held senders until the outage ended
// (RELIABILITY.md, open point 5).
func TestIngestRollbackOnADeadNetwork(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := faults.URLProxyFor(t, pgtest.URL(t))
	s := open(t, viaProxy)
	ctx := context.Background()

	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(ctx, []hookbox.Delivery{storetest.Delivery("s", "in-the-hole")}); err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- tx.Rollback() }()
	const within = 2 * time.Second // the bound is 0.5 s
	select {
	case <-done:
	case <-time.After(within):
		t.Errorf("Rollback still waiting %v into the black hole, want it back within %v", time.Since(start).Round(time.Millisecond), within)
		proxy.Restore()
		<-done
	}
	proxy.Restore()

	// The store recovers on fresh connections, and the rolled-back
	// delivery was not kept.
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "in-the-hole")})
	if err != nil {
		t.Fatalf("ingest after the black hole: %v", err)
	}
	if rs[0].Duplicate {
		t.Error("the delivery of the rolled-back transaction was stored")
	}
}
