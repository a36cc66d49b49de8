package target_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// rawReceiver is a TCP server on 127.0.0.1 that reads each request whole
// and then writes reply to the connection as it is, HTTP or not, and
// closes it. It returns the URL to forward to.
func rawReceiver(t *testing.T, reply func(w io.Writer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if _, err := io.Copy(io.Discard, req.Body); err != nil {
					return
				}
				w := bufio.NewWriter(c)
				reply(w)
				w.Flush()
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook"
}

// TestForwardNeverFollowsRedirects: with a client of the caller's whose
// CheckRedirect follows redirects (http.Client's default), a 3xx reply is
// still the answer, retried: the host the Location names gets nothing,
// neither the body and signature nor the configured secret header (a 307
// or 308 replays them all; Go drops only Authorization and Cookie on the
// way to another host). The caller's client is left as it was.
func TestForwardNeverFollowsRedirects(t *testing.T) {
	other := newSink(t, status(http.StatusOK, ""))
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			http.Redirect(w, r, other.srv.URL+"/elsewhere", code)
		})
		client := &http.Client{}
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{"X-Api-Key": sharedSecret}, Client: client})
		ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{"a":1}`),
			Header: http.Header{"Stripe-Signature": {"t=1,v1=abc"}}}
		err := f.Deliver(context.Background(), ev)
		want := fmt.Sprintf("forward: %d %s (redirect not followed", code, http.StatusText(code))
		if err == nil || worker.IsPermanent(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%d: err = %v, want a retryable error starting %q", code, err, want)
		}
		if client.CheckRedirect != nil {
			t.Errorf("%d: NewForward changed the caller's client", code)
		}
		if n := len(app.requests()); n != 1 {
			t.Errorf("%d: the app got %d requests, want 1", code, n)
		}
	}
	for _, r := range other.requests() {
		t.Errorf("a redirect was followed: the other host got X-Api-Key %q, Stripe-Signature %q, Idempotency-Key %q, body %q",
			r.header.Get("X-Api-Key"), r.header.Get("Stripe-Signature"), r.header.Get(target.HeaderIdempotencyKey), r.body)
	}
}

// TestForwardBoundsReplyHeaders: a reply whose headers run to a megabyte
// is not read whole (net/http reads up to 10 MiB of them, per attempt in
// flight): the attempt fails, to be retried, saying why.
func TestForwardBoundsReplyHeaders(t *testing.T) {
	u := rawReceiver(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\n")
		for i := range 1024 {
			fmt.Fprintf(w, "X-Filler-%d: %s\r\n", i, strings.Repeat("f", 1000))
		}
		io.WriteString(w, "Content-Length: 0\r\n\r\n")
	})
	f := newForward(t, target.ForwardOptions{URL: u})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) || !strings.Contains(err.Error(), "response headers exceeded") {
		t.Errorf("err = %v, want a retryable error for the reply's headers", err)
	}
}

// TestForwardBoundsTransportErrors: a receiver whose status line is not
// HTTP makes net/http fail quoting the whole line, escaped (here 60 KiB
// of control bytes, four times that quoted); the attempt's error keeps
// no more of it than the worker stores (worker.MaxErrorText), so neither
// the attempt's span nor a log line carries the rest.
func TestForwardBoundsTransportErrors(t *testing.T) {
	u := rawReceiver(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1"+strings.Repeat("\x01", 60<<10)+"\r\n\r\n")
	})
	f := newForward(t, target.ForwardOptions{URL: u})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	text := err.Error()
	if max := len("forward: ") + worker.MaxErrorText; len(text) > max {
		t.Errorf("the error is %d bytes, want at most %d: %.120s…", len(text), max, text)
	}
	if !strings.HasPrefix(text, `forward: net/http: HTTP/1.x transport connection broken: malformed HTTP response "HTTP/1.1\x01`) {
		t.Errorf("error %.200q…, want the start of net/http's", text)
	}
}
