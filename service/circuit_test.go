package service_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

// TestSourceCircuit: a source's own forward, strict or not, has a target's
// circuit breaking. After circuit_after failures in a row its circuit
// opens: only single trials reach the app, each after a growing
// cool-down, so an outage uses few of its events' attempts. The pool,
// GET /admin/targets and hookbox_target_circuit_open{target} show it
// under the source's name; once the app recovers a trial closes it and
// every event is done. A source's forward had no circuit: every event
// used an attempt each backoff, and all went dead during an outage of a
// few minutes with the default policy.
func TestSourceCircuit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		plain, strict := newReceiver(t), newReceiver(t)
		plain.fail.Store(true)
		strict.fail.Store(true)
		const token = "admin-token-for-the-source-circuit-test"
		srv := e2e.Start(t, fmt.Sprintf(`
admin_token: %s
workers:
  concurrency: 4
sources:
  - name: f
    scheme: standard-webhooks
    secrets: [%q]
    forward: %s
    max_attempts: 1000
    backoff_min: 1ms
    backoff_max: 5ms
    circuit_after: 3
    circuit_cooldown: 300ms
  - name: s
    scheme: standard-webhooks
    secrets: [%q]
    forward: %s
    strict: true
    max_attempts: 1000
    backoff_min: 1ms
    backoff_max: 5ms
    circuit_after: 3
    circuit_cooldown: 300ms
`, token, shopSecret, plain.srv.URL, shopSecret, strict.srv.URL), dbURL, nil)
		for i := range 10 {
			srv.Send("f", fmt.Sprint("f-", i), []byte(`{"type":"x"}`))
			srv.Send("s", fmt.Sprint("s-", i), []byte(`{"type":"x"}`))
		}
		open := func(name string) bool {
			for _, s := range srv.Svc.Pool.Targets() {
				if s.Name == name {
					return s.CircuitOpen
				}
			}
			t.Fatalf("the pool has no circuit state for source %s", name)
			return false
		}
		waitFor(t, 30*time.Second, "both circuits to open", func() bool { return open("f") && open("s") })
		// While open, only single trials reach the app: 300 ms then 600 ms
		// of cool-down, so at most 2 in a second, and the attempts under
		// way when it opened (the 4 slots; 1 for the strict source), late
		// on a loaded machine. With no circuit, 1-5 ms of backoff makes
		// hundreds a second.
		openedF, openedS := len(plain.requests()), len(strict.requests())
		req, _ := http.NewRequest("GET", srv.URL+"/admin/targets", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, name := range []string{"f", "s"} {
			if !strings.Contains(string(body), fmt.Sprintf(`"name":%q,"kind":"forward"`, name)) {
				t.Errorf("GET /admin/targets does not list source %s: %s", name, body)
			}
		}
		if n := strings.Count(string(body), `"circuit_open":true`); n != 2 {
			t.Errorf("GET /admin/targets shows %d open circuits, want 2: %s", n, body)
		}
		for _, name := range []string{"f", "s"} {
			if v := circuitMetric(t, srv.URL, name); v != "1" {
				t.Errorf("hookbox_target_circuit_open{target=%q} = %q, want 1", name, v)
			}
		}
		time.Sleep(time.Second)
		if n := len(plain.requests()) - openedF; n > 2+4 {
			t.Errorf("source f: %d requests in the second after its circuit opened, want at most the trials (2) and the attempts under way (4)", n)
		}
		if n := len(strict.requests()) - openedS; n > 2+1 {
			t.Errorf("strict source s: %d requests in the second after its circuit opened, want at most the trials (2) and the attempt under way (1)", n)
		}
		plain.fail.Store(false)
		strict.fail.Store(false)
		waitFor(t, 30*time.Second, "both circuits to close", func() bool { return !open("f") && !open("s") })
		srv.WaitIdle(30 * time.Second)
		for _, name := range []string{"f", "s"} {
			if n := srv.QueryInt(fmt.Sprintf(`SELECT count(*) FROM events WHERE source = '%s' AND status = 'done'`, name)); n != 10 {
				t.Errorf("source %s: %d events done, want 10", name, n)
			}
			if v := circuitMetric(t, srv.URL, name); v != "0" {
				t.Errorf("hookbox_target_circuit_open{target=%q} = %q once closed, want 0", name, v)
			}
		}
	})
}

// circuitMetric returns the value of hookbox_target_circuit_open for
// target as /metrics prints it ("" when absent).
func circuitMetric(t *testing.T, url, target string) string {
	t.Helper()
	return metricValue(t, url, fmt.Sprintf("hookbox_target_circuit_open{target=%q}", target))
}

// metricValue returns the value of series (a name and its labels, as
// /metrics prints them) at url's /metrics ("" when absent).
func metricValue(t *testing.T, url, series string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := series + " "
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return v
		}
	}
	return ""
}
