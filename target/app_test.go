package target_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/target"
)

// TestForwardErrorReplyDecompressed: an app that compresses its error
// replies has them recorded as text, whatever the sender said it accepts:
// the sender's Accept-Encoding (about hookbox's reply) is not forwarded,
// so the client asks for gzip itself and decompresses. Forwarded, it made
// the recorded error binary noise.
func TestForwardErrorReplyDecompressed(t *testing.T) {
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "database is down", http.StatusInternalServerError)
			return
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte("database is down"))
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write(b.Bytes())
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL})
	for _, h := range []http.Header{{}, {"Accept-Encoding": {"gzip, deflate, br"}}, {"Accept-Encoding": {"identity"}}} {
		ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Header: h, Payload: []byte(`{}`)}
		err := f.Deliver(context.Background(), ev)
		if err == nil || !strings.Contains(err.Error(), "database is down") {
			t.Errorf("sender's headers %v: error %q, want the app's reply text", h, err)
		}
	}
	for _, r := range app.requests() {
		if got := r.header.Get("Accept-Encoding"); got != "gzip" {
			t.Errorf("app got Accept-Encoding %q, want the client's own gzip", got)
		}
	}
}

// TestForwardHeaderDropsEveryProxyHeader: every Proxy-* header, in any
// case, and the bare Proxy header (httpoxy) are left out, as README
// says; only three Proxy-* names were. Names that merely contain
// "Proxy" are kept.
func TestForwardHeaderDropsEveryProxyHeader(t *testing.T) {
	stored := http.Header{
		"Proxy-Status":              {"x"},
		"Proxy-Authentication-Info": {"x"},
		"Proxy-Authorization":       {"x"},
		"Proxy-Connection":          {"x"},
		"proxy-foo":                 {"x"},
		"PROXY-BAR":                 {"x"},
		"Proxy":                     {"http://evil.example:8080"},
		"X-Proxy-Id":                {"kept"},
		"Proxyish":                  {"kept"},
	}
	out := target.ForwardHeader(stored)
	for name := range out {
		if out.Get(name) != "kept" {
			t.Errorf("%s forwarded to the app", name)
		}
	}
	if len(out) != 2 {
		t.Errorf("forwarded %v, want X-Proxy-Id and Proxyish", out)
	}
}

// TestTargetEventID: a named target's forward and exec get the event's id
// (the 202 reply's), as Hookbox-Event-Id and HOOKBOX_EVENT_ID, not their
// delivery's row id; with the target's name they tell the deliveries of
// one event apart. They got the delivery's row id, a different one for
// each target and none the sender was answered. A source's own forward
// gets its event's id as before.
func TestTargetEventID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := newSink(t, status(http.StatusNoContent, ""))
		dir := t.TempDir()
		script := filepath.Join(dir, "hook.sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' \"$HOOKBOX_EVENT_ID $HOOKBOX_TARGET\" > \"$0.out\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		srv := e2e.Start(t, fmt.Sprintf(`
sources:
  - name: shop
    scheme: none
    id_header: X-Id
    targets:
      - {name: billing, forward: %q}
      - {name: audit, forward: %q}
      - {name: deploy, exec: [%q]}
  - name: plain
    scheme: none
    id_header: X-Id
    forward: %q
`, app.srv.URL, app.srv.URL, script, app.srv.URL), dbURL, nil)
		// Another event first, so that row ids and event ids differ.
		plain := srv.Post("plain", http.Header{"X-Id": {"p1"}}, []byte(`{}`))
		shop := srv.Post("shop", http.Header{"X-Id": {"s1"}}, []byte(`{}`))
		if plain.Status != http.StatusAccepted || shop.Status != http.StatusAccepted {
			t.Fatalf("replies %+v, %+v", plain, shop)
		}
		srv.WaitIdle(30 * time.Second)
		got := map[string]string{}
		for _, r := range app.requests() {
			got[r.header.Get(target.HeaderSource)+"/"+r.header.Get(target.HeaderTarget)] = r.header.Get(target.HeaderEventID)
		}
		want := map[string]string{
			"shop/billing": strconv.FormatInt(shop.ID, 10),
			"shop/audit":   strconv.FormatInt(shop.ID, 10),
			"plain/":       strconv.FormatInt(plain.ID, 10),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Hookbox-Event-Id by source/target: %v, want %v", got, want)
		}
		ran, err := os.ReadFile(script + ".out")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(shop.ID, " deploy"); string(ran) != want {
			t.Errorf("exec got HOOKBOX_EVENT_ID and HOOKBOX_TARGET %q, want %q", ran, want)
		}
	})
}

// TestSignDropsConfiguredSenderHeaders: drop_sender_headers leaves out an
// hmac source's own signature and timestamp headers, whatever their names
// (X-Foo-Hmac, X-Foo-Time), besides the ones hookbox knows; they were
// forwarded, since neither name holds "signature". Without
// drop_sender_headers they are forwarded.
func TestSignDropsConfiguredSenderHeaders(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := newSink(t, status(http.StatusNoContent, ""))
		srv := e2e.Start(t, fmt.Sprintf(`
sources:
  - name: foo
    scheme: hmac
    secrets: ["foo-signing-secret-0123456789"]
    header: x-foo-hmac
    signed: "{timestamp}.{body}"
    timestamp_header: X-Foo-Time
    id_header: X-Foo-Id
    targets:
      - {name: dropped, forward: %q, sign: {secret: %q, drop_sender_headers: true}}
      - {name: kept, forward: %q, sign: {secret: %q}}
`, app.srv.URL, swSecret, app.srv.URL, swSecret), dbURL, nil)
		srv.Send("foo", "f1", []byte(`{"n":1}`))
		srv.WaitIdle(30 * time.Second)
		reqs := app.requests()
		if len(reqs) != 2 {
			t.Fatalf("app got %d requests, want 2", len(reqs))
		}
		for _, r := range reqs {
			name := r.header.Get(target.HeaderTarget)
			drop := name == "dropped"
			for _, h := range []string{"X-Foo-Hmac", "X-Foo-Time"} {
				if _, got := r.header[h]; got == drop {
					t.Errorf("target %s: %s forwarded: %v, want %v", name, h, got, !drop)
				}
			}
			if r.header.Get("X-Foo-Id") != "f1" || r.header.Get("Webhook-Signature") == "" {
				t.Errorf("target %s: the id or hookbox's signature is missing: %v", name, r.header)
			}
		}
	})
}
