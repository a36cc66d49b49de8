package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/verify"
)

// holdWriteLock takes SQLite's write lock on the database at dbURL from
// another connection, as another process would, until the test ends or
// the returned func is called.
func holdWriteLock(t *testing.T, dbURL string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(dbURL, "sqlite:")+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			other.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// infoLogged starts hookbox with config doc on a new SQLite file, logging
// at info into the returned buffer.
func infoLogged(t *testing.T, doc string) (*e2e.Server, *syncbuf.Buffer, string) {
	dbURL := dbtest.SQLiteURL(t)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return e2e.StartLogged(t, doc, dbURL, log, nil), logs, dbURL
}

// lockWait is the config of a SQLite store whose writes wait half a
// second, not the default 5 s, for the write lock holdWriteLock holds:
// how long each delivery and each worker's call waits before it fails,
// which is all these tests wait for (a failed call is a failed call
// after any wait).
const lockWait = `
sqlite:
  busy_timeout: 500ms
`

// openStoreOnly is a config of one unsigned store_only source, open,
// with lockWait.
const openStoreOnly = lockWait + `
sources:
  - name: open
    scheme: none
    id_header: X-Id
    store_only: true
`

// TestStoreOutageLogsSpacedOut: while the store cannot commit, the
// deliveries answered 503 and the /readyz probes answered 503 write a
// line each ten seconds, not one each: their number is the senders' and
// the probes' (no token needed) to choose. They wrote one line each, so
// 500 probes wrote 500 lines, 10 deliveries 10, and every probe pinged
// the store (reconnected to it, when down); a probe now answers from the
// last check for a second.
func TestStoreOutageLogsSpacedOut(t *testing.T) {
	t.Parallel()
	srv, logs, dbURL := infoLogged(t, openStoreOnly)
	holdWriteLock(t, dbURL)
	const n = 10
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := srv.Post("open", http.Header{"X-Id": {fmt.Sprint("id-", i)}}, []byte(`{}`)); r.Status != http.StatusServiceUnavailable {
				t.Errorf("delivery %d with the write lock held elsewhere: %+v, want 503", i, r)
			}
		}()
	}
	wg.Wait()
	if lines := strings.Count(logs.String(), `msg="store delivery"`); lines < 1 || lines > 2 {
		t.Errorf("%d deliveries answered 503 wrote %d lines, want 1 (2 if ten seconds passed)", n, lines)
	}
	notReady := 0
	for range 500 {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			notReady++
		}
	}
	if notReady != 500 {
		t.Errorf("%d of 500 /readyz answered 503 with the store failing, want all", notReady)
	}
	if lines := strings.Count(logs.String(), `msg="not ready"`); lines < 1 || lines > 2 {
		t.Errorf("500 /readyz wrote %d lines, want 1 (2 if ten seconds passed)", lines)
	}
}

// TestStoreBackLogged: once the store commits again, the first delivery
// stored and the first /readyz answered 200 each write one info line
// saying so, with the number of failures: after an outage's spaced-out
// lines, silence alone could not tell a recovered store from a dead one.
func TestStoreBackLogged(t *testing.T) {
	t.Parallel()
	srv, logs, dbURL := infoLogged(t, openStoreOnly)
	release := holdWriteLock(t, dbURL)
	for i := range 3 {
		if r := srv.Post("open", http.Header{"X-Id": {fmt.Sprint("down-", i)}}, []byte(`{}`)); r.Status != http.StatusServiceUnavailable {
			t.Fatalf("delivery %d with the write lock held elsewhere: %+v, want 503", i, r)
		}
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.Contains(logs.String(), "answers again") {
		t.Fatalf("a line says the store answers again while it fails:\n%s", logs)
	}
	release()
	for i := range 3 {
		if r := srv.Post("open", http.Header{"X-Id": {fmt.Sprint("up-", i)}}, []byte(`{}`)); r.Status != http.StatusAccepted {
			t.Fatalf("delivery %d after the lock was released: %+v, want 202", i, r)
		}
	}
	out := logs.String()
	if n := strings.Count(out, `msg="store delivery: the store answers again" failures=3`); n != 1 {
		t.Errorf("%d lines say the store answers again with failures=3, want 1:\n%s", n, out)
	}
	// /readyz answers from its last failed check for a second.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="ready again"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no \"ready again\" line once /readyz answered 200 again:\n%s", logs)
		}
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkerStoreFailuresCounted: while the store cannot commit and no
// delivery arrives, the workers' failing calls (each poll's claim) are
// counted in hookbox_worker_store_errors_total, which the alert
// HookboxWorkerStoreErrors watches. Only the log said so: the one store
// alert, HookboxStoreUnavailable, counts the 503s answered to senders,
// none without traffic, and hookbox_oldest_due_seconds, which the work
// alerts watch, is left out of a scrape whose queue figures cannot be
// read.
func TestWorkerStoreFailuresCounted(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := infoLogged(t, lockWait+`
sources:
  - name: fwd
    scheme: none
    id_header: X-Id
    forward: "http://127.0.0.1:9/never-called"
`)
	holdWriteLock(t, dbURL)
	waitFor(t, 60*time.Second, "a failed call of the workers counted in /metrics", func() bool {
		v := metricValue(t, srv.URL, "hookbox_worker_store_errors_total")
		return v != "" && v != "0"
	})
	if v := metricValue(t, srv.URL, `hookbox_deliveries_total{outcome="unavailable",source="fwd"}`); v != "0" {
		t.Errorf("deliveries answered 503 = %q with none sent, want 0", v)
	}
}

// TestHandshakeReplayNotLogged: a signed handshake (Slack's
// url_verification), which whoever saw it can send again within its
// tolerance, is logged at debug: it wrote an info line each time. The
// minute's summary counts handshakes.
func TestHandshakeReplayNotLogged(t *testing.T) {
	t.Parallel()
	srv, logs, _ := infoLogged(t, `
sources:
  - name: slack
    provider: slack
    secrets: ["logflood-slack-signing-secret-0123456789"]
    store_only: true
`)
	body := []byte(`{"type":"url_verification","challenge":"abc123","token":"x"}`)
	h, err := verify.Sign(srv.Source("slack").Verify(), body, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if r := srv.Post("slack", h, body); r.Status != http.StatusOK {
			t.Fatalf("handshake %d: %+v", i, r)
		}
	}
	if lines := strings.Count(logs.String(), `msg="handshake answered"`); lines != 0 {
		t.Errorf("50 handshakes wrote %d info lines, want none", lines)
	}
}
