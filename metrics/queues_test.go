package metrics_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
)

// TestNewQueuesPreCreatesWhatMoves: NewQueues creates the delivery series
// of the sources and the attempt series of the worked names at 0, and no
// others; a name of either list whose series were not created in advance
// is still counted under its own label once something happens to it
// (an event stored before its source got targets, worked by this
// process), and a name of neither list under "".
func TestNewQueuesPreCreatesWhatMoves(t *testing.T) {
	m := metrics.NewQueues([]string{"fan", "own"}, []string{"own", "fan/app"})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	for k, present := range map[string]bool{
		`hookbox_deliveries_total{outcome="new",source="fan"}`:            true,
		`hookbox_deliveries_total{outcome="new",source="own"}`:            true,
		`hookbox_deliveries_total{outcome="unknown_source",source=""}`:    true,
		`hookbox_deliveries_total{outcome="new",source="fan/app"}`:        false,
		`hookbox_attempts_total{outcome="done",source="own"}`:             true,
		`hookbox_attempts_total{outcome="done",source="fan/app"}`:         true,
		`hookbox_attempt_seconds_count{source="fan/app"}`:                 true,
		`hookbox_dead_total{source="fan/app"}`:                            true,
		`hookbox_attempts_total{outcome="done",source="fan"}`:             false,
		`hookbox_attempt_seconds_count{source="fan"}`:                     false,
		`hookbox_dead_total{source="fan"}`:                                false,
		`hookbox_deliveries_total{outcome="bad_signature",source="fan"}`:  true,
		`hookbox_deliveries_total{outcome="unknown_source",source="fan"}`: false,
	} {
		if v, ok := got[k]; ok != present || v != 0 {
			t.Errorf("%s: present %v (value %v) before anything happened, want present %v", k, ok, v, present)
		}
	}

	now := time.Now()
	m.Attempt(&hookbox.Event{Source: "fan"}, hookbox.Outcome{Status: hookbox.StatusDead, StartedAt: now, FinishedAt: now.Add(time.Millisecond)}, nil)
	m.Delivery("fan/app", metrics.OutcomeNew, time.Millisecond)
	m.Attempt(&hookbox.Event{Source: "elsewhere"}, hookbox.Outcome{Status: hookbox.StatusDone}, nil)
	got = scrape(t, srv.URL)
	for k, want := range map[string]float64{
		`hookbox_attempts_total{outcome="dead",source="fan"}`:      1,
		`hookbox_attempt_seconds_count{source="fan"}`:              1,
		`hookbox_dead_total{source="fan"}`:                         1,
		`hookbox_deliveries_total{outcome="new",source="fan/app"}`: 1,
		`hookbox_attempts_total{outcome="done",source=""}`:         1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	for k := range got {
		if strings.Contains(k, "elsewhere") {
			t.Errorf("unbounded label value in %s", k)
		}
	}
}
