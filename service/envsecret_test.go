package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/service"
)

// TestEnvSecretsInWorkNeverShown: secrets that reach a target from the
// environment where `config check` masks them but the Redactor did not
// look (an exec argument built from ${API_TOKEN}, a forward URL from
// ${SLACK_URL} whose path is the credential) stay out of the stored
// errors and the log, though the command prints its argument when it
// fails and the receiver echoes the path in its 404. Both were shown.
func TestEnvSecretsInWorkNeverShown(t *testing.T) {
	const (
		token     = "tok_live_9f8e7d6c5b4a39281706"
		pathToken = "XyZ9abcdefGHIJKLmnop1234"
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "no route for %s", r.URL.Path)
	}))
	t.Cleanup(app.Close)
	t.Setenv("HOOKBOX_TEST_API_TOKEN", token)
	t.Setenv("HOOKBOX_TEST_SLACK_URL", app.URL+"/services/T0001/B0001/"+pathToken)
	cfg, err := config.Parse([]byte(`
sources:
  - name: deploy
    scheme: none
    exec: ["sh", "-c", "echo calling the api with token $1 failed; exit 2", "sh", "${HOOKBOX_TEST_API_TOKEN}"]
    max_attempts: 1
  - name: notify
    scheme: none
    forward: "${HOOKBOX_TEST_SLACK_URL}"
    max_attempts: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(t.TempDir(), "hookbox.db")
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
	for _, src := range []string{"deploy", "notify"} {
		resp, err := http.Post("http://"+addr+"/webhooks/"+src, "application/json", strings.NewReader(`{"id":"e1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ingest %s: %d", src, resp.StatusCode)
		}
	}
	var evs []hookbox.Event
	for deadline := time.Now().Add(20 * time.Second); ; {
		evs, err = svc.Store.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusDead})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 2 && strings.Count(logs.String(), "event dead") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not both dead and logged after 20s: %+v\n%s", evs, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	for _, secret := range []string{token, pathToken} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
	for _, ev := range evs {
		want := map[string]string{
			"deploy": "calling the api with token [REDACTED] failed",
			"notify": "no route for /services/T0001/B0001/[REDACTED]",
		}[ev.Source]
		if !strings.Contains(ev.LastError, want) || strings.Contains(ev.LastError, token) || strings.Contains(ev.LastError, pathToken) {
			t.Errorf("%s: stored error %q, want it to hold %q", ev.Source, ev.LastError, want)
		}
	}
}
