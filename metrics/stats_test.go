package metrics

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookbox/hookbox"
)

// TestSlowStatsSpacedOut: a stats query that takes long (a count over
// millions of events) is run again only after ten times as long, however
// often the scrapes come; a quick one after the cache time.
func TestSlowStatsSpacedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		cost := 2 * time.Second
		c := &statsCollector{cacheFor: DefaultStatsCache, log: slog.New(slog.DiscardHandler),
			stats: func(ctx context.Context, now time.Time) (hookbox.Stats, error) {
				calls++
				time.Sleep(cost)
				return hookbox.Stats{ByStatus: map[hookbox.Status]int{hookbox.StatusPending: calls}}, nil
			}}
		collect := func() {
			ch := make(chan prometheus.Metric, 16)
			c.Collect(ch)
			close(ch)
		}
		collect() // at 0 s, done at 2 s
		for range 3 {
			time.Sleep(5500 * time.Millisecond) // past the cache time, not past 10 × 2 s
			collect()
		}
		if calls != 1 {
			t.Fatalf("a 2 s query ran %d times in 18.5 s of scrapes, want once", calls)
		}
		cost = 0
		time.Sleep(2 * time.Second) // 20.5 s after the first query started
		collect()
		if calls != 2 {
			t.Fatalf("queried %d times after 10 × its cost, want 2", calls)
		}
		time.Sleep(DefaultStatsCache) // quick now: the cache time again
		collect()
		if calls != 3 {
			t.Fatalf("a quick query waited longer than the cache time: %d calls", calls)
		}
	})
}
