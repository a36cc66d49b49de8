package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/bench"
)

// TestBenchHandlerFlag runs a short bench with each --handler and checks
// the report: every delivery answered 202, the handler named, the events
// finished while sending reported rather than waited for. The load lasts
// 500ms; --requests bounds it and sizes the warm-up before it (1000, not
// 3000: under -race each warm-up took most of the subtest's time).
func TestBenchHandlerFlag(t *testing.T) {
	for _, h := range []string{"noop", "wait1s", "forward"} {
		t.Run(h, func(t *testing.T) {
			out := mustCLI(t, "bench", "--targets", "sqlite", "--handler", h, "--duration", "500ms",
				"--requests", "1000", "--connections", "8", "--concurrency", "4", "--json")
			var rs []bench.Result
			if err := json.Unmarshal([]byte(out), &rs); err != nil {
				t.Fatalf("--json output %q: %v", out, err)
			}
			if len(rs) != 1 {
				t.Fatalf("results = %+v, want one", rs)
			}
			r := rs[0]
			if r.Target != "sqlite" || r.Handler != h {
				t.Errorf("target %q handler %q, want sqlite %s", r.Target, r.Handler, h)
			}
			if r.Ingest == nil || r.Ingest.Requests == 0 || r.Ingest.Status[http.StatusAccepted] != r.Ingest.Requests || r.Ingest.Errors != 0 {
				t.Fatalf("ingest = %+v, want every delivery answered 202", r.Ingest)
			}
			if r.Drain == nil || !r.Drain.WhileSending || r.Drain.DrainTail != 0 {
				t.Fatalf("drain = %+v, want the events finished while sending, the queue not waited for", r.Drain)
			}
			if h == "forward" && r.Drain.Events == 0 {
				t.Errorf("the app forwarded to received nothing")
			}
			if r.Drain.Events > r.Ingest.Requests+5000 { // the warm-up's events may finish during the run
				t.Errorf("handler finished %d events, more than were sent", r.Drain.Events)
			}
		})
	}
}

func TestBenchHandlerFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--handler", "sleepy"}, "want noop, wait1s or forward"},
		{[]string{"--handler", "wait1s", "--drain"}, "cannot be combined"},
		{[]string{"--handler", "wait1s", "--drain-only", "10"}, "cannot be combined"},
		{[]string{"--concurrency", "-1"}, "must not be negative"},
		{[]string{"--batch-size", "-1"}, "--batch-size must not be negative"},
	} {
		_, _, err := runCLI(t, append([]string{"bench", "--targets", "sqlite"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
