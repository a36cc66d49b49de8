package service

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// metricNamesConfig has one source of each kind: its own forward (fwd),
// named targets, one forwarded and one for a Go program's handlers (fan),
// store_only (kept), and nothing configured, for a Go program's handlers
// (bare).
const metricNamesConfig = `
sources:
  - name: fwd
    scheme: none
    allow_ips: ["127.0.0.1"]
    forward: "%[1]s/fwd"
  - name: fan
    scheme: none
    allow_ips: ["127.0.0.1"]
    targets:
      - name: app
        forward: "%[1]s/fan"
      - name: prog
        go_handler: true
  - name: kept
    scheme: none
    allow_ips: ["127.0.0.1"]
    store_only: true
  - name: bare
    scheme: none
    allow_ips: ["127.0.0.1"]
`

// TestMetricsPreCreatedWhereTheyMove: /metrics shows at 0, before any
// traffic, the delivery outcomes of each source and the attempt series
// (hookbox_attempts_total, hookbox_attempt_seconds, hookbox_dead_total)
// of each queue something works: a source's own forward, a named target,
// a go_handler target and a source left to a Go program's handlers. It
// shows no delivery series for a target queue, which no delivery is ever
// sent to, and no attempt series for a source with targets or store_only,
// whose events are never worked themselves: every series was created for
// every name, about 14,000 that always read 0 at 200 sources of 5 targets.
// Traffic is still counted under the names it moves.
func TestMetricsPreCreatedWhereTheyMove(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, fmt.Sprintf(metricNamesConfig, app.URL), nil)
		got := scrapeMetrics(t, h.url)

		const deliveryOutcomes = 9 // every outcome but unknown_source
		const attemptSeries = 5 + 11 + 1
		count := func(label string) (deliveries, attempts int) {
			for k := range got {
				if !strings.Contains(k, `source="`+label+`"`) {
					continue
				}
				switch {
				case strings.HasPrefix(k, "hookbox_deliveries_total{"):
					deliveries++
				case strings.HasPrefix(k, "hookbox_attempts_total{"), strings.HasPrefix(k, "hookbox_attempt_seconds_"), strings.HasPrefix(k, "hookbox_dead_total{"):
					attempts++
				}
			}
			return deliveries, attempts
		}
		for _, c := range []struct {
			label                string
			deliveries, attempts int
		}{
			{"fwd", deliveryOutcomes, attemptSeries},
			{"fan", deliveryOutcomes, 0},
			{"fan/app", 0, attemptSeries},
			{"fan/prog", 0, attemptSeries},
			{"kept", deliveryOutcomes, 0},
			{"bare", deliveryOutcomes, attemptSeries},
		} {
			d, a := count(c.label)
			if d != c.deliveries || a != c.attempts {
				t.Errorf("source=%q: %d delivery series and %d attempt series before any traffic, want %d and %d", c.label, d, a, c.deliveries, c.attempts)
			}
		}
		for _, k := range []string{
			`hookbox_deliveries_total{outcome="new",source="fan"}`,
			`hookbox_deliveries_total{outcome="unknown_source",source=""}`,
			`hookbox_attempts_total{outcome="dead",source="fan/app"}`,
			`hookbox_dead_total{source="fan/app"}`,
			`hookbox_dead_total{source="fwd"}`,
			`hookbox_attempt_seconds_count{source="bare"}`,
		} {
			if v, ok := got[k]; !ok || v != 0 {
				t.Errorf("%s = %v (present %v) before any traffic, want 0", k, v, ok)
			}
		}

		if code := h.send("fan", "", `{"type":"order.paid"}`, nil); code != http.StatusAccepted {
			t.Fatalf("delivery to fan: %d", code)
		}
		after := map[string]float64{
			`hookbox_deliveries_total{outcome="new",source="fan"}`:    1,
			`hookbox_attempts_total{outcome="done",source="fan/app"}`: 1,
			`hookbox_attempt_seconds_count{source="fan/app"}`:         1,
		}
		// The attempt's count and its time are two updates: a scrape
		// between them sees the one and not the other. Await both.
		counted := func() bool {
			for k, want := range after {
				if got[k] < want {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(10 * time.Second); !counted() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			got = scrapeMetrics(t, h.url)
		}
		for k, want := range after {
			if got[k] != want {
				t.Errorf("%s = %v after one delivery to fan, want %v", k, got[k], want)
			}
		}
		if d, a := count("fan"); d != deliveryOutcomes || a != 0 {
			t.Errorf(`source="fan" after its delivery was worked: %d delivery series and %d attempt series, want %d and 0`, d, a, deliveryOutcomes)
		}
	})
}
