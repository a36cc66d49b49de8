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

// TestExecSettingsNotMasked: the service masks the exec_env values that
// hold secrets, not every one. A literal setting under a plain name
// (APP_ENV=production) and a directory from the environment used as
// exec_dir are shown: in a sender's delivery id in the debug log, and in
// a failed command's output in the stored error. Every exec_env value
// and every ${VAR} value of 8 bytes or more was masked, so the log read
// delivery_id=deploy-[REDACTED]-2 and the error "APP_ENV is [REDACTED],
// deploying from [REDACTED]". A value under a name that says it is a
// secret (API_TOKEN), written in the file, and one taken from the
// environment into exec_env, whatever its name, are still masked.
func TestExecSettingsNotMasked(t *testing.T) {
	const (
		token = "literal-api-token-1"
		stage = "stage-from-the-environment"
	)
	dir := t.TempDir()
	release := filepath.Join(dir, "releases", "current")
	if err := os.MkdirAll(release, 0o700); err != nil {
		t.Fatal(err)
	}
	sh := filepath.Join(dir, "deploy.sh")
	if err := os.WriteFile(sh, []byte(`#!/bin/sh
echo "APP_ENV is $APP_ENV, deploying $HOOKBOX_DELIVERY_ID to $STAGE from $(pwd) with $API_TOKEN"
exit 1
`), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOOKBOX_TEST_RELDIR", release)
	t.Setenv("HOOKBOX_TEST_STAGE", stage)
	var logs syncbuf.Buffer
	srv := e2e.StartLogged(t, fmt.Sprintf(`
sources:
  - name: a
    scheme: none
    id_header: X-Id
    exec: [%q]
    exec_dir: "${HOOKBOX_TEST_RELDIR}"
    exec_env: ["APP_ENV=production", "API_TOKEN=%s", "STAGE=${HOOKBOX_TEST_STAGE}"]
    max_attempts: 1
`, sh, token), dbtest.SQLiteURL(t), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	r := srv.Post("a", http.Header{"X-Id": {"deploy-production-2"}}, []byte(`{}`))
	if r.Status != http.StatusAccepted {
		t.Fatalf("delivery: %+v", r)
	}
	var ev hookbox.Event
	waitFor(t, 30*time.Second, "the event to end dead", func() bool {
		evs := srv.Events("a")
		if len(evs) == 1 && evs[0].Status == hookbox.StatusDead {
			ev = evs[0]
			return strings.Contains(logs.String(), "event dead")
		}
		return false
	})
	out := logs.String()
	if !strings.Contains(out, "delivery_id=deploy-production-2") {
		t.Errorf("the log does not show the delivery id deploy-production-2:\n%s", out)
	}
	want := fmt.Sprintf("output: APP_ENV is production, deploying deploy-production-2 to [REDACTED] from %s with [REDACTED]", release)
	if !strings.Contains(ev.LastError, want) {
		t.Errorf("stored error %q, want it to hold %q", ev.LastError, want)
	}
	for _, secret := range []string{token, stage} {
		if strings.Contains(out, secret) || strings.Contains(ev.LastError, secret) {
			t.Errorf("%q shown in the log or the stored error:\n%s\n%s", secret, ev.LastError, out)
		}
	}
}
