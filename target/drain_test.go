package target_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
)

// TestForwardSuccessWithEndlessBody: a 2xx reply whose body never ends
// (the receiver sends its headers and a few bytes, then holds the rest
// until the test ends) counts as delivered without waiting for the body:
// Deliver returns nil long before the attempt's 30 s limit. It read the
// body to its end, for the connection's reuse, and so held the attempt,
// and its slot, until the limit.
func TestForwardSuccessWithEndlessBody(t *testing.T) {
	hold := make(chan struct{})
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "ok, and more to come")
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(hold) }) // before the sink's Close waits for the handler
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- f.Deliver(ctx, &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Deliver = %v, want nil (a 200)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver still running 10 s after a 200 whose body is held open (attempt limit 30 s)")
	}
}

// TestForwardFailureWithEndlessBody: a refusal (500) whose body never
// ends (the receiver sends its headers and a few bytes, then holds the
// rest) is a failure to retry as soon as its first bytes are in, with
// those bytes in the error, not when the attempt's 30 s limit closes the
// body. Reading the text for the error held the attempt, and its slot,
// until that limit, as the body of a success once did.
func TestForwardFailureWithEndlessBody(t *testing.T) {
	hold := make(chan struct{})
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "database down")
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(hold) })
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- f.Deliver(ctx, &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "database down") {
			t.Errorf("Deliver = %v, want the 500 with the text that came", err)
		}
		if ctx.Err() != nil {
			t.Errorf("Deliver returned only once the attempt's limit passed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver still running 10 s after a 500 whose body is held open (attempt limit 30 s)")
	}
}
