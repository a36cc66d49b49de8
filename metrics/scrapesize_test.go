package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
)

// TestScrapeSizeAtManyQueues: at 300 sources and 594 worked queues (two
// targets each, as in session 34's large configuration), a scrape before
// any traffic holds at most 13,000 series: each queue's
// hookbox_attempt_seconds is eight buckets, +Inf, _sum and _count, and
// an attempt still lands in the bucket of its duration. With fifteen
// buckets the histogram was 18 series a queue, 10,692 of the scrape's
// 17,051 (1.27 MB).
func TestScrapeSizeAtManyQueues(t *testing.T) {
	var sources, worked []string
	for i := range 300 {
		s := fmt.Sprintf("source-%03d", i)
		sources = append(sources, s)
		worked = append(worked, s+"/primary-target")
		if i < 294 {
			worked = append(worked, s+"/backup-target")
		}
	}
	m := metrics.NewQueues(sources, worked)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	histogram := 0
	for k := range got {
		if strings.HasPrefix(k, `hookbox_attempt_seconds_`) && strings.Contains(k, `source="source-007/primary-target"`) {
			histogram++
		}
	}
	if histogram != 11 {
		t.Errorf("hookbox_attempt_seconds of one queue is %d series, want 11 (8 buckets, +Inf, _sum, _count)", histogram)
	}
	if len(got) > 13000 {
		t.Errorf("a scrape at %d queues holds %d series, want at most 13,000", len(worked), len(got))
	}

	now := time.Now()
	m.Attempt(&hookbox.Event{Source: "source-007/primary-target"}, hookbox.Outcome{Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now.Add(300 * time.Millisecond)}, nil)
	got = scrape(t, srv.URL)
	for le, want := range map[string]float64{"0.1": 0, "0.5": 1, "120": 1, "+Inf": 1} {
		k := fmt.Sprintf(`hookbox_attempt_seconds_bucket{source="source-007/primary-target",le=%q}`, le)
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v) after an attempt of 300 ms, want %v", k, v, ok, want)
		}
	}
}
