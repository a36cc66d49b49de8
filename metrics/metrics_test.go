package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
)

// scrape fetches url and returns each sample line's value by its series
// (name and labels as printed).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestCountersAndLabels(t *testing.T) {
	m := metrics.New([]string{"polar", "github"})
	m.Delivery("polar", metrics.OutcomeNew, 3*time.Millisecond)
	m.Delivery("polar", metrics.OutcomeNew, 4*time.Millisecond)
	m.Delivery("polar", metrics.OutcomeDuplicate, time.Millisecond)
	m.Delivery("github", metrics.OutcomeBadSignature, 0)
	m.Delivery("no-such-source-xyz", metrics.OutcomeUnknownSource, 0)
	m.Delivery("polar", "made-up", 0)
	m.Delivery("github", metrics.OutcomeForbidden, 0) // allow_ips refused it
	m.Batch(3, time.Millisecond, nil)
	m.Batch(1, time.Millisecond, nil)

	start := time.Now()
	ev := &hookbox.Event{ID: 1, Source: "polar", DeliveryID: "msg_secretish"}
	m.Attempt(ev, hookbox.Outcome{Status: hookbox.StatusPending, StartedAt: start, FinishedAt: start.Add(20 * time.Millisecond)}, nil)
	m.Attempt(ev, hookbox.Outcome{Status: hookbox.StatusDead, StartedAt: start, FinishedAt: start.Add(time.Millisecond)}, nil)
	m.Attempt(ev, hookbox.Outcome{Status: hookbox.StatusDone}, hookbox.ErrLeaseLost)
	m.Attempt(&hookbox.Event{Source: "gone"}, hookbox.Outcome{Status: hookbox.StatusDone}, nil)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	want := map[string]float64{
		`hookbox_deliveries_total{outcome="new",source="polar"}`:            2,
		`hookbox_deliveries_total{outcome="duplicate",source="polar"}`:      1,
		`hookbox_deliveries_total{outcome="bad_signature",source="github"}`: 1,
		`hookbox_deliveries_total{outcome="unknown_source",source=""}`:      1,
		`hookbox_deliveries_total{outcome="other",source="polar"}`:          1,
		`hookbox_deliveries_total{outcome="forbidden",source="github"}`:     1,
		`hookbox_deliveries_total{outcome="new",source="github"}`:           0,
		`hookbox_ingest_seconds_count`:                                      3,
		`hookbox_ingest_batch_size_count`:                                   2,
		`hookbox_ingest_batch_size_sum`:                                     4,
		`hookbox_attempts_total{outcome="retry",source="polar"}`:            1,
		`hookbox_attempts_total{outcome="dead",source="polar"}`:             1,
		`hookbox_attempts_total{outcome="lost",source="polar"}`:             1,
		`hookbox_attempts_total{outcome="done",source="polar"}`:             0,
		`hookbox_attempts_total{outcome="done",source=""}`:                  1,
		`hookbox_dead_total{source="polar"}`:                                1,
		`hookbox_attempt_seconds_count{source="polar"}`:                     2,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "no-such-source") || strings.Contains(k, "msg_secretish") || strings.Contains(k, "gone") {
			t.Errorf("unbounded label value in %s", k)
		}
	}
	if _, ok := got[`go_goroutines`]; !ok {
		t.Errorf("Go runtime collector missing")
	}
}

// TestFailedBatchNotObserved: hookbox_ingest_batch_size counts the
// deliveries of group commits that committed. A failed one, which during
// an outage holds every request the committer failed at once, most never
// in a transaction, was observed: 300 "committed together" while nothing
// committed.
func TestFailedBatchNotObserved(t *testing.T) {
	m := metrics.New([]string{"polar"})
	m.Batch(300, time.Millisecond, errors.New("store unavailable"))
	m.Batch(2, time.Millisecond, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	if n, sum := got["hookbox_ingest_batch_size_count"], got["hookbox_ingest_batch_size_sum"]; n != 1 || sum != 2 {
		t.Errorf("after a failed batch of 300 and a committed one of 2: count %v, sum %v; want 1 and 2", n, sum)
	}
}

func TestStatsCachedAtScrape(t *testing.T) {
	m := metrics.New(nil)
	var calls atomic.Int32
	var fail atomic.Bool
	oldest := time.Now().Add(-90 * time.Second)
	m.WatchStats(func(ctx context.Context, now time.Time) (hookbox.Stats, error) {
		calls.Add(1)
		if fail.Load() {
			return hookbox.Stats{}, errors.New("db down")
		}
		return hookbox.Stats{ByStatus: map[hookbox.Status]int{hookbox.StatusPending: 3, hookbox.StatusDead: 2}, OldestDue: oldest,
			OldestDueAge: hookbox.DueAge(oldest, now)}, nil
	}, 0, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	got := scrape(t, srv.URL)
	for k, v := range map[string]float64{
		`hookbox_events{status="pending"}`:    3,
		`hookbox_events{status="processing"}`: 0,
		`hookbox_events{status="done"}`:       0,
		`hookbox_events{status="dead"}`:       2,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if age := got["hookbox_oldest_due_seconds"]; age < 89 || age > 120 {
		t.Errorf("oldest due age %v, want about 90", age)
	}
	fail.Store(true)
	scrape(t, srv.URL)
	got = scrape(t, srv.URL)
	if n := calls.Load(); n != 1 {
		t.Errorf("stats queried %d times for 3 scrapes within the cache time, want 1", n)
	}
	if got[`hookbox_events{status="pending"}`] != 3 {
		t.Errorf("cached value lost: %v", got)
	}
}

// TestDeliveryCountsAndUnlogged: the console's counts are the counters'
// values, unknown sources under ""; refusals the log left out are counted
// by source and why, an unknown source's under "".
func TestDeliveryCountsAndUnlogged(t *testing.T) {
	m := metrics.New([]string{"polar"})
	m.Delivery("polar", metrics.OutcomeNew, time.Millisecond)
	m.Delivery("polar", metrics.OutcomeDuplicate, time.Millisecond)
	m.Delivery("polar", metrics.OutcomeDuplicate, time.Millisecond)
	m.Delivery("guess", metrics.OutcomeUnknownSource, 0)
	got := m.DeliveryCounts()
	if got["polar"]["new"] != 1 || got["polar"]["duplicate"] != 2 || got[""]["unknown_source"] != 1 || got["guess"] != nil {
		t.Errorf("counts: %v", got)
	}
	m.RejectionUnlogged("polar", "rate_limited")
	m.RejectionUnlogged("anything-else", "queue_full")
	m.ConnectionRefused()
	ts := httptest.NewServer(m.Handler())
	defer ts.Close()
	s := scrape(t, ts.URL)
	if s[`hookbox_rejections_unlogged_total{source="polar",why="rate_limited"}`] != 1 ||
		s[`hookbox_rejections_unlogged_total{source="",why="queue_full"}`] != 1 ||
		s[`hookbox_connections_refused_total`] != 1 {
		t.Errorf("unlogged: %v", s)
	}
}

// TestSlotsReadAtScrape: hookbox_worker_slots and
// hookbox_worker_slots_busy are what the slots function says at each
// scrape, not a value kept from an earlier one.
func TestSlotsReadAtScrape(t *testing.T) {
	m := metrics.New(nil)
	var held atomic.Int32
	m.WatchSlots(func() (int, int) { return int(held.Load()), 32 })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, n := range []int32{0, 7, 32, 3} {
		held.Store(n)
		got := scrape(t, srv.URL)
		if got["hookbox_worker_slots"] != 32 || got["hookbox_worker_slots_busy"] != float64(n) {
			t.Errorf("with %d slots held: hookbox_worker_slots %v, hookbox_worker_slots_busy %v; want 32 and %d",
				n, got["hookbox_worker_slots"], got["hookbox_worker_slots_busy"], n)
		}
	}
}
