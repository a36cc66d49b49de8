package target_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
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
