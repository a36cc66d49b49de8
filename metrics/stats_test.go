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
		c := &statsCollector{cache: newScrapeCache(func(ctx context.Context, now time.Time) (hookbox.Stats, error) {
			calls++
			time.Sleep(cost)
			return hookbox.Stats{ByStatus: map[hookbox.Status]int{hookbox.StatusPending: calls}}, nil
		}, "queue stats", DefaultStatsCache, slog.New(slog.DiscardHandler))}
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

// TestSlowHeldKeysBounded: a count of held keys the store never answers
// is given up on after scrapeQueryTimeout, leaving its gauge out of the
// scrape, and is not asked again for ten times as long.
func TestSlowHeldKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		query := func(ctx context.Context, now time.Time) (map[string]int, error) {
			calls++
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c := &heldKeysCollector{names: []string{"shop/app"}, cache: newScrapeCache(query, "held keys", DefaultStatsCache, nil)}
		collect := func() int {
			ch := make(chan prometheus.Metric, 16)
			c.Collect(ch)
			close(ch)
			return len(ch)
		}
		start := time.Now()
		if n := collect(); n != 0 {
			t.Fatalf("%d metrics from a count that never answered", n)
		}
		if took := time.Since(start); took != scrapeQueryTimeout {
			t.Fatalf("the scrape waited %v, want %v", took, scrapeQueryTimeout)
		}
		time.Sleep(DefaultStatsCache)
		collect()
		if calls != 1 {
			t.Fatalf("asked again %d times within ten times the timeout", calls-1)
		}
	})
}
