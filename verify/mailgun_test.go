package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"
)

// mailgunMAC is Mailgun's recipe, written out here rather than taken from
// the verifier: hex HMAC-SHA256 of the timestamp then the token.
func mailgunMAC(key string, ts int64, token string) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "%d%s", ts, token)
	return hex.EncodeToString(m.Sum(nil))
}

// TestMailgunNonce: a verified Mailgun delivery returns its token as the
// nonce, held until its timestamp leaves the tolerance; the other schemes
// return none, as their signatures cover the body.
func TestMailgunNonce(t *testing.T) {
	const key, token = "mailgun-key-1", "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"
	ts := testNow.Unix() - 30
	body := fmt.Sprintf(`{"signature":{"timestamp":"%d","token":"%s","signature":"%s"},"event-data":{"id":"ev1","event":"opened"}}`,
		ts, token, mailgunMAC(key, ts, token))
	v := mustNew(t, Config{Scheme: SchemeMailgun, Secrets: []string{key}, Tolerance: 2 * time.Minute})
	res, err := v.Verify(Request{Body: []byte(body), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nonce != token || !res.NonceExpires.Equal(time.Unix(ts, 0).Add(2*time.Minute)) {
		t.Fatalf("nonce %q until %v; want the token until the timestamp plus the tolerance", res.Nonce, res.NonceExpires)
	}
	if res.DeliveryID != "ev1" || res.EventType != "opened" {
		t.Fatalf("id %q type %q", res.DeliveryID, res.EventType)
	}

	cfg := Config{Scheme: SchemeStripe, Secrets: []string{"whsec_x"}}
	hdr, signed, err := SignRequest(cfg, []byte(`{"id":"evt_1","type":"a"}`), "", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := mustNew(t, cfg).Verify(Request{Header: hdr, Body: signed, Now: testNow}); err != nil || res.Nonce != "" {
		t.Fatalf("stripe: nonce %q, err %v; want none", res.Nonce, err)
	}
	if !SignsNonces(v) || SignsNonces(mustNew(t, cfg)) {
		t.Fatalf("SignsNonces: mailgun %v, stripe %v; want true and false", SignsNonces(v), SignsNonces(mustNew(t, cfg)))
	}
}

// TestMailgunParentSignature: an event of a subaccount is signed twice,
// with the subaccount's key and, as parent-signature, the parent
// account's; a source configured with either key accepts it, one with
// neither refuses it, and a parent-signature that is not 64 hex digits is
// malformed.
func TestMailgunParentSignature(t *testing.T) {
	const sub, parent, token = "sub-account-key", "parent-account-key", "tok-123"
	ts := testNow.Unix()
	body := func(sig, parentSig string) []byte {
		return []byte(fmt.Sprintf(`{"signature":{"timestamp":"%d","token":"%s","signature":"%s","parent-signature":"%s"},"event-data":{"id":"ev2"}}`,
			ts, token, sig, parentSig))
	}
	signed := body(mailgunMAC(sub, ts, token), mailgunMAC(parent, ts, token))
	for _, key := range []string{sub, parent} {
		v := mustNew(t, Config{Scheme: SchemeMailgun, Secrets: []string{key}})
		if res, err := v.Verify(Request{Body: signed, Now: testNow}); err != nil || res.Nonce != token {
			t.Fatalf("key %s: %+v, %v", key, res, err)
		}
	}
	v := mustNew(t, Config{Scheme: SchemeMailgun, Secrets: []string{"other-key"}})
	if _, err := v.Verify(Request{Body: signed, Now: testNow}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("another key: %v; want unauthorized", err)
	}
	v = mustNew(t, Config{Scheme: SchemeMailgun, Secrets: []string{parent}})
	if _, err := v.Verify(Request{Body: body(mailgunMAC(sub, ts, token), "zz"), Now: testNow}); err != errMailgunBadSig {
		t.Fatalf("malformed parent-signature: %v", err)
	}
	// A parent-signature made with another token does not count.
	if _, err := v.Verify(Request{Body: body(mailgunMAC(sub, ts, token), mailgunMAC(parent, ts, "other")), Now: testNow}); err != errMailgunNoMatch {
		t.Fatalf("parent-signature over another token: %v", err)
	}
}

// TestMailgunToleranceBounded: a mailgun source's tolerance may not pass
// MaxNonceTolerance, the time its tokens are remembered for.
func TestMailgunToleranceBounded(t *testing.T) {
	if _, err := New(Config{Scheme: SchemeMailgun, Secrets: []string{"k"}, Tolerance: MaxNonceTolerance}); err != nil {
		t.Fatalf("tolerance at the bound: %v", err)
	}
	if _, err := New(Config{Scheme: SchemeMailgun, Secrets: []string{"k"}, Tolerance: MaxNonceTolerance + time.Second}); err == nil {
		t.Fatal("a tolerance past MaxNonceTolerance was accepted")
	}
}
