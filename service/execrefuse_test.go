//go:build unix

package service_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
)

// TestExecRefusesEventsForGood: an exec command refuses an event for good
// with an exit code listed in permanent_exit_codes (65, EX_DATAERR, from a
// script that checks the payload), as a forward's app does with a 410.
// Six bad events in a row, on a source's own exec and on a named exec
// target, each end dead after their one attempt, the circuit stays
// closed, and a good event sent after them runs at once. Every non-zero
// exit was retried and counted by the circuit: the bad events opened it,
// its trials went to their retries, and the good event waited (here for
// the whole circuit_cooldown of an hour).
func TestExecRefusesEventsForGood(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		valid := filepath.Join(dir, "valid.sh")
		if err := os.WriteFile(valid, []byte(`#!/bin/sh
if grep -q bad; then
  echo "refusing $HOOKBOX_DELIVERY_ID: not a valid payload" >&2
  exit 65
fi
echo "$HOOKBOX_DELIVERY_ID" >> "$DIR/valid.log"
`), 0o755); err != nil {
			t.Fatal(err)
		}
		var logs syncbuf.Buffer
		srv := e2e.StartLogged(t, fmt.Sprintf(`
sources:
  - name: own
    scheme: none
    id_header: X-Id
    exec: [%[1]q]
    exec_env: ["DIR=%[2]s/own"]
    permanent_exit_codes: [65]
    circuit_cooldown: 1h
  - name: tgt
    scheme: none
    id_header: X-Id
    targets:
      - name: run
        exec: [%[1]q]
        exec_env: ["DIR=%[2]s/tgt"]
        permanent_exit_codes: [65]
        circuit_cooldown: 1h
`, valid, dir), dbURL, slog.New(slog.NewTextHandler(&logs, nil)), nil)
		for _, sub := range []string{"own", "tgt"} {
			if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		send := func(source, id, body string) {
			t.Helper()
			r := srv.Post(source, http.Header{"X-Id": {id}}, []byte(body))
			if r.Status != http.StatusAccepted {
				t.Fatalf("delivery %s to %s: %+v", id, source, r)
			}
		}
		queues := map[string]string{"own": "own", "tgt": "tgt/run"}
		for i := 1; i <= 6; i++ {
			for source := range queues {
				send(source, fmt.Sprint("bad", i), fmt.Sprintf(`{"bad":%d}`, i))
			}
		}
		// Every bad event has had its first attempt before the good one
		// comes, as in the review's run: with every exit retried, the
		// circuit was open by then.
		waitFor(t, 30*time.Second, "a first attempt of each bad event", func() bool {
			for _, q := range queues {
				evs := srv.Events(q)
				if len(evs) != 6 {
					return false
				}
				for _, ev := range evs {
					if ev.Attempts == 0 || ev.Status == hookbox.StatusProcessing {
						return false
					}
				}
			}
			return true
		})
		for source := range queues {
			send(source, "good1", `{"good":1}`)
		}
		waitFor(t, 30*time.Second, "the good events to run", func() bool {
			for source := range queues {
				b, _ := os.ReadFile(filepath.Join(dir, source, "valid.log"))
				if string(b) != "good1\n" {
					return false
				}
			}
			return true
		})
		srv.WaitIdle(30 * time.Second)
		for source, q := range queues {
			for _, ev := range srv.Events(q) {
				switch {
				case ev.DeliveryID == "good1":
					if ev.Status != hookbox.StatusDone || ev.Attempts != 1 {
						t.Errorf("%s: good1 %s after %d attempts, want done after 1", source, ev.Status, ev.Attempts)
					}
				case ev.Status != hookbox.StatusDead || ev.Attempts != 1 ||
					!strings.Contains(ev.LastError, "exit code 65 (in permanent_exit_codes: not retried); output: refusing "+ev.DeliveryID):
					t.Errorf("%s: %s %s after %d attempts (%q), want dead after 1, refused", source, ev.DeliveryID, ev.Status, ev.Attempts, ev.LastError)
				}
			}
		}
		for _, s := range srv.Svc.Pool.Targets() {
			if s.CircuitOpen {
				t.Errorf("the circuit of %s is open", s.Name)
			}
		}
		if strings.Contains(logs.String(), "circuit open") {
			t.Errorf("a circuit opened:\n%s", logs.String())
		}
	})
}
