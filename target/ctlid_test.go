package target_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// TestForwardKeyEncodesControls: the key Forward sends is the source and
// the delivery id as they are, unless the request could not carry it:
// then its control bytes, trailing white space and every "%" are
// percent-encoded. Unsigned, only a C0 byte other than tab, or DEL, makes
// a key unsendable; a tab or trailing white space went out as they are
// before, and the key of such an event must not change across an
// upgrade. Signed, those were refused too, and are encoded.
func TestForwardKeyEncodesControls(t *testing.T) {
	for _, c := range []struct {
		id, unsigned, signed string
	}{
		{"evt_1", "s:evt_1", "s:evt_1"},
		{"50%off", "s:50%off", "s:50%off"},
		{"evt_1\n", "s:evt_1%0A", "s:evt_1%0A"},
		{"a%0A\tb\x7f", "s:a%250A%09b%7F", "s:a%250A%09b%7F"},
		{"evt\t2", "s:evt\t2", "s:evt%092"},
		{"ends with ", "s:ends with ", "s:ends with%20"},
		{"nbsp\u00a0", "s:nbsp\u00a0", "s:nbsp%C2%A0"},
		{"é inside ok", "s:é inside ok", "s:é inside ok"},
		{"c1\u0085inside", "s:c1\u0085inside", "s:c1\u0085inside"}, // a header carries it; ingest refuses new ones
	} {
		ev := &hookbox.Event{Source: "s", DeliveryID: c.id}
		if got := target.ForwardKey(ev, false); got != c.unsigned {
			t.Errorf("ForwardKey(%q, unsigned) = %q, want %q", c.id, got, c.unsigned)
		}
		if got := target.ForwardKey(ev, true); got != c.signed {
			t.Errorf("ForwardKey(%q, signed) = %q, want %q", c.id, got, c.signed)
		}
	}
}

// TestControlDeliveryIDForwarded: events stored with a control character
// in their delivery id (ingest refuses them now; older ones remain) are
// forwarded, signed or not, with the same encoded Idempotency-Key on
// every attempt, which is also the id the signature covers. Such an event
// used to fail every attempt (net/http refuses the header; signing
// refused the id at once) and end dead.
func TestControlDeliveryIDForwarded(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	// Each source's first request fails, so that every event is sent twice.
	var mu sync.Mutex
	seen := map[string]bool{}
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		first := !seen[r.Header.Get(target.HeaderSource)]
		seen[r.Header.Get(target.HeaderSource)] = true
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	plain := newForward(t, target.ForwardOptions{URL: app.srv.URL})
	signed := newForward(t, target.ForwardOptions{URL: app.srv.URL, Sign: &target.SignOptions{Secret: swSecret, DropSenderHeaders: true}})
	pol := worker.Policy{MaxAttempts: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Timeout: 5 * time.Second}
	rg := newRig(t, map[string]worker.Target{"plain": plain, "signed": signed}, pol)
	ids := rg.ingest(
		hookbox.Delivery{Source: "plain", DeliveryID: "evt_1\nx", Payload: []byte(`{}`)},
		hookbox.Delivery{Source: "signed", DeliveryID: "evt\t2", Payload: []byte(`{"a":1}`)},
	)
	rg.want(ids[0], hookbox.StatusDone, 2)
	rg.want(ids[1], hookbox.StatusDone, 2)
	want := map[string]string{"plain": "plain:evt_1%0Ax", "signed": "signed:evt%092"}
	got := map[string]int{}
	for _, r := range app.requests() {
		src := r.header.Get(target.HeaderSource)
		got[src]++
		if k := r.header.Get(target.HeaderIdempotencyKey); k != want[src] {
			t.Errorf("%s: Idempotency-Key %q, want %q", src, k, want[src])
		}
		if src != "signed" {
			continue
		}
		if id := r.header.Get("webhook-id"); id != want[src] {
			t.Errorf("signed: webhook-id %q, want the Idempotency-Key %q", id, want[src])
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("signed: the app cannot verify hookbox's signature: %v", err)
		}
	}
	if got["plain"] != 2 || got["signed"] != 2 {
		t.Errorf("requests by source %v, want 2 each", got)
	}
}
