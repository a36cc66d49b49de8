package service_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/service"
)

// TestSecretsNeverLogged: an exec script that prints its environment and
// the configured secrets fails; neither the log (WARN and ERROR lines carry
// the output) nor the stored attempt holds a secret, and the script never
// saw hookbox's environment.
func TestSecretsNeverLogged(t *testing.T) {
	const (
		adminToken = "adm-7f3a9c0e5b21d4aa"
		whsec      = "whsec_dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g="
		ghSecret   = "gh-webhook-secret-42"
	)
	t.Setenv("HOOKBOX_TEST_ADMIN_TOKEN", adminToken)
	dir := t.TempDir()
	sh := filepath.Join(dir, "leak.sh")
	script := "#!/bin/sh\nenv\necho \"admin=" + adminToken + " polar=" + whsec + " key=dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g= gh=" + ghSecret + "\"\nexit 1\n"
	if err := os.WriteFile(sh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
admin_token: "${HOOKBOX_TEST_ADMIN_TOKEN}"
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["` + whsec + `"]
  - name: github
    scheme: github
    secrets: ["` + ghSecret + `"]
  - name: leak
    scheme: none
    exec: ["` + sh + `"]
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 10ms
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(dir, "hookbox.db")
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	addr, done := serve(t, ctx, svc)
	t.Cleanup(func() {
		cancel()
		<-done
	})

	resp, err := http.Post("http://"+addr+"/webhooks/leak", "application/json", strings.NewReader(`{"id":"e1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest: %d", resp.StatusCode)
	}
	var ev hookbox.Event
	for deadline := time.Now().Add(20 * time.Second); ; {
		evs, err := svc.Store.Events(context.Background(), hookbox.Filter{Source: "leak"})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 && evs[0].Status == hookbox.StatusDead {
			ev = evs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event not dead after 20s: %+v", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The worker logs a dead event after recording it: wait for the line.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "event dead"); {
		if time.Now().After(deadline) {
			t.Fatalf("no 'event dead' line:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	for _, secret := range []string{adminToken, "dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g", ghSecret} {
		if strings.Contains(out, secret) {
			t.Errorf("log holds %q:\n%s", secret, out)
		}
		if strings.Contains(ev.LastError, secret) {
			t.Errorf("stored error holds %q: %s", secret, ev.LastError)
		}
	}
	if !strings.Contains(out, "admin=[REDACTED] polar=[REDACTED] key=[REDACTED] gh=[REDACTED]") {
		t.Errorf("log lacks the masked output line:\n%s", out)
	}
	if strings.Contains(ev.LastError, "HOOKBOX_TEST_ADMIN_TOKEN") {
		t.Errorf("the script saw hookbox's environment: %s", ev.LastError)
	}
}
