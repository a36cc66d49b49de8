package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

const (
	token       = "ui-admin-token-for-tests-0123"
	rightSecret = "whsec_dWktcmlnaHQtc2VjcmV0LWZvci10ZXN0cw=="
	wrongSecret = "whsec_dWktd3Jvbmctc2VjcmV0LWZvci10ZXN0cw=="
)

// app is a running hookbox with the console on its own admin listener,
// forwarding polar's events to an app that fails while failing is set.
type app struct {
	t       *testing.T
	dbURL   string
	svc     *service.Service
	hooks   string // webhook base URL
	admin   string // admin listener base URL
	failing *atomic.Bool
	stop    func()
}

// appConfig: polar forwards to sink and goes dead after one failed
// attempt; secret is what hookbox believes polar signs with.
func appConfig(sink, secret string) string {
	return fmt.Sprintf(`
admin_token: %q
admin_listen: "127.0.0.1:0"
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: [%q]
    forward: %q
    max_attempts: 1
`, token, secret, sink)
}

// newSink starts the app polar forwards to; it fails while the flag is
// set.
func newSink(t *testing.T) (string, *atomic.Bool) {
	failing := &atomic.Bool{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if failing.Load() {
			http.Error(w, "the app is down for the test", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)
	return sink.URL, failing
}

func startApp(t *testing.T, dbURL, sink, secret string, failing *atomic.Bool) *app {
	t.Helper()
	srv := e2e.Start(t, appConfig(sink, secret), dbURL, nil)
	return &app{t: t, dbURL: dbURL, svc: srv.Svc, hooks: srv.URL, admin: srv.Admin, failing: failing, stop: func() { srv.Stop() }}
}

// send posts a delivery to polar signed with secret and returns the
// status.
func (a *app) send(secret, id string, body []byte) int {
	a.t.Helper()
	hdr, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}}, body, id, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", a.hooks+"/webhooks/polar", bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// await waits for cond, failing the test after 15 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventByDelivery waits for the event with this delivery id to reach
// status st and returns it.
func (a *app) eventByDelivery(id string, st hookbox.Status) hookbox.Event {
	a.t.Helper()
	var ev hookbox.Event
	await(a.t, "event "+id+" "+string(st), func() bool {
		evs, err := a.svc.Store.Events(context.Background(), hookbox.Filter{Source: "polar", DeliveryID: id})
		if err != nil || len(evs) != 1 {
			return false
		}
		ev = evs[0]
		return ev.Status == st
	})
	return ev
}

// get fetches an admin-listener path with the Bearer token.
func (a *app) get(path string) (int, string, http.Header) {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// hostile is sender text that would run as script if it reached a page
// unescaped.
const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`

func mustNotContainMarkup(t *testing.T, page, where string) {
	t.Helper()
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(page, bad) {
			t.Errorf("%s: the page holds %q unescaped", where, bad)
		}
	}
}
