package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/e2e"
)

// TestQuickstart: the README's quickstart, with the real example config
// pointed at this receiver: a signed delivery to the app source is
// forwarded, printed and done; one to a store_only source is stored.
func TestQuickstart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	printed := make(chan string, 10)
	go http.Serve(ln, handler(func(s string) { printed <- s }, http.StatusNoContent))

	cfg, err := config.Load("../hookbox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]config.Source{}
	for _, s := range cfg.Sources {
		sources[s.Name] = s
	}
	app, polar := sources["app"], sources["polar"]
	if !strings.HasPrefix(app.Forward, "http://127.0.0.1:3000/") || !polar.StoreOnly {
		t.Fatalf("examples/hookbox.yaml: app forwards to %q, not this receiver's default address, or polar is not store_only", app.Forward)
	}
	// The example's two sources, the forward pointed at this test's port.
	yaml := "sources:\n" +
		"  - {name: app, scheme: " + app.Scheme + ", secrets: [\"" + app.Secrets[0] + "\"], forward: \"http://" + ln.Addr().String() + "/hooks/app\"}\n" +
		"  - {name: polar, scheme: " + polar.Scheme + ", secrets: [\"" + polar.Secrets[0] + "\"], store_only: true}\n"
	srv := e2e.Start(t, yaml, "sqlite:"+filepath.Join(t.TempDir(), "hookbox.db"), nil)
	srv.Send("app", "msg_quickstart_1", []byte(`{"type":"order.paid","data":{"id":"ord_1"}}`))
	srv.Send("polar", "msg_quickstart_2", []byte(`{"type":"order.created"}`))

	var got string
	select {
	case got = <-printed:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver got nothing")
	}
	for _, want := range []string{"POST /hooks/app", `Idempotency-Key "app:msg_quickstart_1"`, "attempt 1", `"ord_1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("receiver output lacks %q:\n%s", want, got)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		evs := srv.Events("app")
		if len(evs) == 1 && evs[0].Status == hookbox.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("app event not done: %+v", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if evs := srv.Events("polar"); len(evs) != 1 || evs[0].Status != hookbox.StatusStored {
		t.Errorf("store_only event: %+v, want one stored", evs)
	}
}

// TestLongOrHostileBody: a body past 4 KiB is read whole and printed cut,
// saying so; control characters (a terminal's escape sequences) in the
// body and the path are printed as U+FFFD, not sent to the operator's
// terminal.
func TestLongOrHostileBody(t *testing.T) {
	var got string
	h := handler(func(s string) { got = s }, http.StatusNoContent)
	body := "\x1b]0;owned\x07{\"a\":\"" + strings.Repeat("x", 10_000) + "\"}"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/hooks/app%1b[2J", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d", rec.Code)
	}
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("control characters printed: %q", got[:40])
	}
	if !strings.Contains(got, "(10018 bytes in all; the first 4096 shown)") {
		t.Errorf("a cut body is not said to be cut: …%q", got[len(got)-80:])
	}
}
