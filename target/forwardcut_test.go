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
	"github.com/hookbox/hookbox/worker"
)

// TestForwardIndentedEchoNeverShowsPartOfSecret: an app that refuses the
// forward and echoes its request headers in an indented (pretty-printed)
// body puts the configured header's secret across the end of the bytes
// Forward reads of the body, while collapsing the indentation leaves the
// shown text far under its 200 bytes: the secret, cut by the read, was not
// masked, and up to all but one of its bytes were stored in the error.
func TestForwardIndentedEchoNeverShowsPartOfSecret(t *testing.T) {
	const secret = "k7Qp2mVx9LrT4wZs8NcB6hJd3FgY5aUe1oRi0" // 37 bytes
	// However much indentation comes before the echoed secret.
	for pad := 150; pad <= 300; pad++ {
		app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			body := `{"error":"bad key",` + strings.Repeat(" ", pad) + `"x-api-key":"` + r.Header.Get("X-Api-Key") + `"}`
			w.Write([]byte(body))
		})
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL + "/hook",
			Headers: map[string]string{"X-Api-Key": secret}})
		err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil {
			t.Fatal("a 401 taken for done")
		}
		for n := len(secret); n >= 8; n-- {
			if strings.Contains(err.Error(), secret[:n]) {
				t.Fatalf("indentation %d: the error shows the first %d bytes of the forward header's secret: %s", pad, n, err)
			}
		}
	}
}

// TestForwardRetryAfterBeyondUint64: a Retry-After of delay-seconds too
// large for a uint64 is still a valid (RFC 9110: 1*DIGIT) and very long
// delay, honoured up to the cap (worker.MaxRetryAfter) as 4294967296 is:
// it was ignored, and the event retried at the backoff's seconds.
func TestForwardRetryAfterBeyondUint64(t *testing.T) {
	for _, v := range []string{"4294967296", "18446744073709551616"} {
		app := newSink(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.Header().Set("Retry-After", v)
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL + "/hook"})
		pol := worker.Policy{MaxAttempts: 5, BackoffMin: time.Second, BackoffMax: 2 * time.Second, Timeout: 5 * time.Second}
		r := newRig(t, map[string]worker.Target{"s": f}, pol)
		id := r.ingest(hookbox.Delivery{Source: "s", DeliveryID: "d1", Payload: []byte(`{}`)})[0]
		deadline := time.Now().Add(10 * time.Second)
		for {
			e, err := r.s.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Attempts >= 1 && e.Status == hookbox.StatusPending {
				if wait := time.Until(e.NextAttemptAt); wait < 30*time.Minute {
					t.Errorf("Retry-After: %s: next attempt in %v, want about worker.MaxRetryAfter (1h)", v, wait.Round(time.Second))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("event not retried-pending after 10s: %s, %d attempts", e.Status, e.Attempts)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestForwardTrickledEchoNeverShowsPartOfSecret: an app (or a slow link)
// that sends the first part of a refusal that echoes the forward header's
// secret, then holds the rest past Forward's errorBodyWait (1s): the read
// is cut inside the secret, and its first bytes were stored in the error,
// not masked.
func TestForwardTrickledEchoNeverShowsPartOfSecret(t *testing.T) {
	const secret = "k7Qp2mVx9LrT4wZs8NcB6hJd3FgY5aUe1oRi0"
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusUnauthorized)
		key := r.Header.Get("X-Api-Key")
		io.WriteString(w, `{"error":"bad key","x-api-key":"`+key[:24])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes before Forward gives up on it
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL + "/hook",
		Headers: map[string]string{"X-Api-Key": secret}})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("a 401 taken for done")
	}
	for n := len(secret); n >= 8; n-- {
		if strings.Contains(err.Error(), secret[:n]) {
			t.Fatalf("the error shows the first %d bytes of the forward header's secret: %s", n, err)
		}
	}
}
