package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// BenchmarkClaim leases 7 or 8 events per claim from a backlog of 200,000,
// asking for the same number each time or for a different one each time,
// as the forward pool does (it asks for as many as it has free slots). The
// two should cost the same: SQLite prepares a statement again when a value
// its planner read changes, which a claim's LIMIT must not cause (see
// limitParam).
func BenchmarkClaim(b *testing.B) {
	for _, changing := range []bool{false, true} {
		b.Run(map[bool]string{false: "same-limit", true: "changing-limit"}[changing], func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "h.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var ds []hookbox.Delivery
			for i := range 200000 {
				ds = append(ds, storetest.Delivery("bench", fmt.Sprint(i)))
				if len(ds) == 1000 {
					if _, err := s.Ingest(context.Background(), ds); err != nil {
						b.Fatal(err)
					}
					ds = ds[:0]
				}
			}
			now := time.Now().Add(time.Hour)
			b.ResetTimer()
			for i := range b.N {
				limit := 8
				if changing {
					limit = 7 + i%2
				}
				evs, err := s.Claim(context.Background(), hookbox.ClaimParams{
					Owner: fmt.Sprint("bench-", i), Limit: limit, Lease: time.Minute, Sources: []string{"bench"}, Now: now})
				if err != nil || len(evs) != limit {
					b.Fatalf("claim %d: %d events, %v", i, len(evs), err)
				}
			}
		})
	}
}
