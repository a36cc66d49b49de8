package service_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestIDsNotUTF8Refused: two different verified deliveries whose body ids
// differ only in bytes that are not UTF-8, or in lone UTF-16 surrogate
// escapes, are two deliveries. Both used to decode to one id (U+FFFD in
// place of the difference), so the second was answered 202 "duplicate"
// and lost; an id that is not UTF-8 text is now refused (400), as one in
// a header always was, and nothing is stored.
func TestIDsNotUTF8Refused(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := startWith(t, dbURL, testConfig)
		for _, body := range []string{
			"{\"id\":\"evt_\xff\",\"type\":\"a\"}", "{\"id\":\"evt_\xfe\",\"type\":\"b\"}",
			`{"id":"evt_\ud800","type":"a"}`, `{"id":"evt_\udc00","type":"b"}`,
		} {
			if r := do(t, h.signed("stripe", "", []byte(body))); r.status != http.StatusBadRequest || !strings.Contains(r.Error, "UTF-8") {
				t.Errorf("body %q: %d %+v, want 400 naming UTF-8", body, r.status, r)
			}
		}
		if n := h.count(hookbox.Filter{}); n != 0 {
			t.Errorf("%d events stored, want none", n)
		}
		// An id that escapes ordinary text is the id that text is.
		a := do(t, h.signed("stripe", "", []byte(`{"id":"evt_\u00e9","type":"a"}`)))
		b := do(t, h.signed("stripe", "", []byte(`{"id":"evt_é","type":"a"}`)))
		if a.status != http.StatusAccepted || b.status != http.StatusAccepted || !b.Duplicate || b.ID != a.ID {
			t.Errorf("escaped and plain é: %+v then %+v, want one event and its duplicate", a, b)
		}
	})
}

// TestEventTypeNotUTF8Kept: an event type with a byte that is not UTF-8
// (a Latin-1 é in X-GitHub-Event, which net/http accepts, or in a Stripe
// body) is stored with U+FFFD in its place: it is a label, not the dedupe
// key, and a verified delivery is not refused over it. The header's used
// to be answered 400, and the sender gave up on the delivery.
func TestEventTypeNotUTF8Kept(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := startWith(t, dbURL, testConfig)
		body := []byte(`{"zen":"x"}`)
		req := h.signed("github", "d-1", body)
		req.Header.Set("X-GitHub-Event", "push\xe9")
		gh := do(t, req)
		st := do(t, h.signed("stripe", "", []byte("{\"id\":\"evt_1\",\"type\":\"push\xe9\"}")))
		for name, r := range map[string]reply{"github": gh, "stripe": st} {
			if r.status != http.StatusAccepted {
				t.Errorf("%s: %d %+v, want 202", name, r.status, r)
				continue
			}
			e, err := h.svc.Store.Event(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if e.EventType != "push\uFFFD" {
				t.Errorf("%s: stored event type %q, want %q", name, e.EventType, "push\uFFFD")
			}
		}
	})
}

// TestCompressedBodyRefused: a body with a Content-Encoding other than
// identity is refused (415, naming identity in Accept-Encoding) and
// nothing is stored. It was stored compressed and forwarded without the
// header (forwarding drops it), so the app got gzip bytes it was not told
// of, and a source reading its id from the body refused it as not JSON
// after its signature had passed.
func TestCompressedBodyRefused(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := startWith(t, dbURL, testConfig)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(`{"zen":"x"}`))
		zw.Close()
		for _, enc := range []string{"gzip", "br", "identity, gzip"} {
			req := h.signed("github", "gz-"+enc, gz.Bytes())
			req.Header.Set("Content-Encoding", enc)
			if r := do(t, req); r.status != http.StatusUnsupportedMediaType || r.header.Get("Accept-Encoding") != "identity" {
				t.Errorf("Content-Encoding %q: %d %+v, want 415 with Accept-Encoding: identity", enc, r.status, r)
			}
		}
		if n := h.count(hookbox.Filter{}); n != 0 {
			t.Errorf("%d events stored, want none", n)
		}
		req := h.signed("github", "plain", []byte(`{"zen":"x"}`))
		req.Header.Set("Content-Encoding", "identity")
		if r := do(t, req); r.status != http.StatusAccepted {
			t.Errorf("Content-Encoding identity: %d %+v, want 202", r.status, r)
		}
	})
}

// TestHeaderBytesKept: a header value with a byte that is not UTF-8 (an
// obs-text byte net/http accepts: a Latin-1 é, alone after ASCII or
// inside otherwise UTF-8 text) is stored and forwarded byte for byte, as
// every other header is. It used to be stored, and so forwarded, with
// U+FFFD in place of the byte, on both stores.
func TestHeaderBytesKept(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		app := newReceiver(t)
		h := startWith(t, dbURL, fmt.Sprintf(`
sources:
  - name: open
    scheme: none
    forward: %s
`, app.srv.URL))
		sent := map[int64][]string{}
		for i, note := range [][]string{{"caf\xe9"}, {"żółw \xe9 €", "plain"}} {
			// A body of its own: without an id the body is the key.
			req, err := http.NewRequest("POST", h.url+"/webhooks/open", strings.NewReader(fmt.Sprintf(`{"x":%d}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header["X-Note"] = note
			req.Header.Set("Content-Type", `application/json; charset="iso-8859-1"`)
			r := do(t, req)
			if r.status != http.StatusAccepted || r.Duplicate {
				t.Fatalf("X-Note %q: reply %+v", note, r)
			}
			sent[r.ID] = note
			e, err := h.svc.Store.Event(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Header.Values("X-Note"); !slices.Equal(got, note) {
				t.Errorf("stored X-Note = %q, want %q", got, note)
			}
		}
		waitFor(t, 30*time.Second, "both forwards", func() bool { return len(app.requests()) >= len(sent) })
		for _, f := range app.requests() {
			if got, want := f.header.Values("X-Note"), sent[f.delivery]; !slices.Equal(got, want) {
				t.Errorf("event %d: forwarded X-Note = %q, want %q", f.delivery, got, want)
			}
		}
	})
}
