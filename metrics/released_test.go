package metrics_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
)

// TestReleasedAttemptCounted: an attempt cut short by shutdown and given
// back (hookbox.Outcome.Released) is counted as released, not as a retry,
// so a deploy does not read as a burst of failures; the series exists
// from the start for each configured source.
func TestReleasedAttemptCounted(t *testing.T) {
	m := metrics.New([]string{"polar", "github"})
	ev := &hookbox.Event{ID: 1, Source: "polar"}
	m.Attempt(ev, hookbox.Outcome{Status: hookbox.StatusPending, Released: true}, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	want := map[string]float64{
		`hookbox_attempts_total{outcome="released",source="polar"}`:  1,
		`hookbox_attempts_total{outcome="retry",source="polar"}`:     0,
		`hookbox_attempts_total{outcome="released",source="github"}`: 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

// TestNotRunCountedDead: an event ended dead without running
// (hookbox.Outcome.NotRun, its last attempt's worker stopped) is counted
// as a death, in hookbox_dead_total and under dead, as it was before its
// claim's count was taken back, and makes no series of its own. Nor is it
// an attempt's run time: the worker gives it the times of its judgement,
// and hookbox_attempt_seconds observed it as a run of 0 s.
func TestNotRunCountedDead(t *testing.T) {
	m := metrics.New([]string{"polar"})
	ev := &hookbox.Event{ID: 1, Source: "polar"}
	now := time.Now()
	m.Attempt(ev, hookbox.Outcome{Status: hookbox.StatusDead, NotRun: true, StartedAt: now, FinishedAt: now}, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	want := map[string]float64{
		`hookbox_attempts_total{outcome="dead",source="polar"}`: 1,
		`hookbox_dead_total{source="polar"}`:                    1,
		`hookbox_attempt_seconds_count{source="polar"}`:         0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got[`hookbox_attempts_total{outcome="`+hookbox.AttemptNotRun+`",source="polar"}`]; ok {
		t.Errorf("a series of its own for %s", hookbox.AttemptNotRun)
	}
}
