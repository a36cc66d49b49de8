package server

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/verify"
)

// TestHandshakeAnsweredNotStored: a sender's signed URL check gets the
// verifier's reply and stores nothing; an unsigned one gets 401; a real
// event after it is stored as usual.
func TestHandshakeAnsweredNotStored(t *testing.T) {
	cfg := verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{"slack-signing-secret"}, Header: "X-Slack-Signature", Prefix: "v0=",
		TimestampHeader: "X-Slack-Request-Timestamp", Signed: "v0:{timestamp}:{body}", IDField: "event_id", Handshake: verify.HandshakeSlack}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		outcomes []string
	)
	observed := func() string { // sorted: each is observed after its reply
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(slices.Sorted(slices.Values(outcomes)), ",")
	}
	b := setup(t, Config{Sources: []Source{{Name: "slack", Verifier: v}}, Observe: func(_, outcome string, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		outcomes = append(outcomes, outcome)
	}})
	send := func(body string, sign bool) (int, http.Header, string) {
		h, err := verify.Sign(cfg, []byte(body), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !sign {
			h.Set("X-Slack-Signature", "v0="+strings.Repeat("0", 64))
		}
		kv := []string{"Content-Type", "application/json"}
		for k := range h {
			kv = append(kv, k, h.Get(k))
		}
		return b.post(t, "slack", strings.NewReader(body), kv...)
	}

	status, h, reply := send(`{"type":"url_verification","challenge":"c0ffee42"}`, true)
	if status != http.StatusOK || reply != `{"challenge":"c0ffee42"}` || h.Get("Content-Type") != "application/json" {
		t.Fatalf("handshake: %d %q %v", status, reply, h)
	}
	if status, _, _ := send(`{"type":"url_verification","challenge":"c0ffee42"}`, false); status != http.StatusUnauthorized {
		t.Fatalf("unsigned handshake: %d", status)
	}
	if n := len(b.rec.stored()); n != 0 {
		t.Fatalf("handshakes stored: %d", n)
	}
	if status, _, reply := send(`{"type":"event_callback","event_id":"Ev9","event":{"type":"message"}}`, true); status != http.StatusAccepted {
		t.Fatalf("event: %d %s", status, reply)
	}
	if got := b.rec.stored(); len(got) != 1 || got[0].DeliveryID != "Ev9" {
		t.Fatalf("stored %+v", got)
	}
	// Observe runs after the reply is written.
	waitFor(t, "three outcomes", func() bool { return strings.Count(observed(), ",") == 2 })
	if got := observed(); got != "bad_signature,handshake,new" {
		t.Fatalf("outcomes %s", got)
	}
}

// TestTokenHeaderNotStored: the header that carries a token scheme's
// secret itself is left out of the stored headers (so it is never shown or
// forwarded); signature headers are kept.
func TestTokenHeaderNotStored(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Secrets: []string{"gitlab-token-secret"}, Header: "X-Gitlab-Token", IDHeader: "Idempotency-Key"})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, Config{Sources: []Source{{Name: "gitlab", Verifier: v}}})
	status, _, reply := b.post(t, "gitlab", strings.NewReader(`{"object_kind":"push"}`),
		"X-Gitlab-Token", "gitlab-token-secret", "Idempotency-Key", "k1", "X-Gitlab-Event", "Push Hook")
	if status != http.StatusAccepted {
		t.Fatalf("%d %s", status, reply)
	}
	got := b.rec.stored()
	if len(got) != 1 || got[0].Header.Get("X-Gitlab-Event") != "Push Hook" || got[0].Header.Get("X-Gitlab-Token") != "" {
		t.Fatalf("stored headers %v", got[0].Header)
	}
	if strings.Contains(b.log.String(), "gitlab-token-secret") {
		t.Fatal("the token reached the log")
	}
}
