package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/loadgen"
	"github.com/hookbox/hookbox/verify"
)

// TestBenchHandlerFlag runs a short bench with each --handler and checks
// the report: every delivery answered 202, the handler named, the events
// finished while sending reported rather than waited for.
func TestBenchHandlerFlag(t *testing.T) {
	for _, h := range []string{handlerNoop, handlerWait1s} {
		t.Run(h, func(t *testing.T) {
			out := mustCLI(t, "bench", "--targets", "sqlite", "--handler", h, "--duration", "500ms",
				"--requests", "3000", "--connections", "8", "--concurrency", "4", "--json")
			var rs []benchResult
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
		{[]string{"--handler", "sleepy"}, "want noop or wait1s"},
		{[]string{"--handler", "wait1s", "--drain"}, "cannot be combined"},
		{[]string{"--handler", "wait1s", "--drain-only", "10"}, "cannot be combined"},
		{[]string{"--concurrency", "-1"}, "must not be negative"},
	} {
		_, _, err := runCLI(t, append([]string{"bench", "--targets", "sqlite"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestBenchWaitHandler: the wait1s handler prepares outside any
// transaction (a delivery is stored and answered while a Prepare waits),
// then writes one row per event in Apply.
func TestBenchWaitHandler(t *testing.T) {
	ctx := context.Background()
	vc := verify.Config{Scheme: "standard-webhooks", Secrets: []string{benchSecret}}
	f := &benchFlags{handler: handlerWait1s, synchronous: "FULL"}
	bt, err := startBenchTarget(ctx, "sqlite", f, vc)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.stop()
	bt.serve()
	body := benchBody(256)
	gen := newDeliveries(vc, body, 0)
	send := func(i int) {
		t.Helper()
		res, err := loadgen.Run(ctx, loadgen.Options{URL: bt.url, Connections: 1, Requests: []loadgen.Request{gen.next(i)}, Body: body})
		if err != nil || res.Status[http.StatusAccepted] != 1 {
			t.Fatalf("delivery %d: %+v %v", i, res, err)
		}
	}
	send(0)
	await(t, "the first Prepare to start", func() bool { return bt.prepared.Load() >= 1 })
	// The Prepare now waits for a second outside any transaction: the
	// store takes a delivery meanwhile.
	send(1)
	if n := bt.handled.Load(); n != 0 {
		t.Errorf("a delivery was answered only after %d Apply ran: Prepare held up ingest", n)
	}
	send(2)
	if err := bt.waitHandled(ctx, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	var rows, waited int
	err = bt.svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*), min(waited) FROM bench_effects`).Scan(&rows, &waited)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 3 || waited < int(benchWait.Milliseconds()) {
		t.Errorf("bench_effects: %d rows, shortest wait %d ms; want 3 rows, each after a %v Prepare", rows, waited, benchWait)
	}
	if n := bt.prepared.Load(); n != 3 {
		t.Errorf("Prepare ran %d times for 3 events", n)
	}
	await(t, "the events to be done", func() bool { return queued(ctx, bt.svc) == 0 })
}

// await polls cond until it holds, failing the test after a minute.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
