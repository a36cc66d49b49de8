package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// The tests here run hookbox on hosts whose clocks are off the PostgreSQL
// server's: pgtest.ClockURL moves the database's clock instead, which is
// the same for every time the host computes (the pool's and the store's
// time.Now alike).

// TestEventFromHostAheadDueAtOnce: an event received by a host whose clock
// is 10 minutes ahead of the PostgreSQL server's (its received_at is 10
// minutes in the server's future) is due at once, and so are its
// deliveries to targets; they were first due at received_at.
func TestEventFromHostAheadDueAtOnce(t *testing.T) {
	s := dbtest.Open(t, pgtest.ClockURL(t, -10*time.Minute))
	ctx := context.Background()
	ingest(t, s, storetest.Delivery("plain", "ahead"), storetest.Keyed("routed", "t", "ahead", ""))
	for _, src := range []string{"plain", hookbox.QueueName("routed", "t")} {
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o-" + src, Limit: 10, Lease: time.Minute, Sources: []string{src}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			all, _ := s.Events(ctx, hookbox.Filter{Source: src})
			t.Errorf("a claim of %s right after the ingest took %d events, want 1 (stored: %+v)", src, len(evs), all)
		}
	}
}
