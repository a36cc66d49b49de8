package verify

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// libSW signs with the Standard Webhooks reference library.
func libSW(t testing.TB, secret string, raw bool, id string, ts time.Time, body []byte) string {
	t.Helper()
	var wh *standardwebhooks.Webhook
	var err error
	if raw {
		wh, err = standardwebhooks.NewWebhookRaw([]byte(secret))
	} else {
		wh, err = standardwebhooks.NewWebhook(secret)
	}
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func swHdr(id string, ts time.Time, sig string) http.Header {
	return hdr("webhook-id", id, "webhook-timestamp", strconv.FormatInt(ts.Unix(), 10), "webhook-signature", sig)
}

func TestStandardWebhooksVerify(t *testing.T) {
	const id = "msg_2b7YxqQ"
	body := eventBody
	sigA := libSW(t, swSecretA, false, id, testNow, body)
	sigB := libSW(t, swSecretB, false, id, testNow, body)
	def := Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}
	ok := Result{DeliveryID: id, EventType: "invoice.paid"}
	ts := strconv.FormatInt(testNow.Unix(), 10)
	rawSecret := "polar_whs_plainSecretNotBase64!"

	cases := []verifyCase{
		{name: "valid", header: swHdr(id, testNow, sigA), body: body, want: ok},
		{name: "svix headers", header: hdr("svix-id", id, "svix-timestamp", ts, "svix-signature", sigA), body: body, want: ok},
		{name: "lower-case header map", header: http.Header{"webhook-id": {id}, "webhook-timestamp": {ts}, "webhook-signature": {sigA}}, body: body,
			wantErr: ErrUnauthorized, errText: "missing webhook-signature"},
		{name: "surrounding whitespace", header: hdr("webhook-id", " "+id+" ", "webhook-timestamp", " "+ts+"\t", "webhook-signature", "  "+sigA+"  "), body: body, want: ok},
		{name: "body not JSON has no type", header: swHdr(id, testNow, libSW(t, swSecretA, false, id, testNow, []byte("plain text"))), body: []byte("plain text"), want: Result{DeliveryID: id}},
		{name: "type not a string", header: swHdr(id, testNow, libSW(t, swSecretA, false, id, testNow, []byte(`{"type":7}`))), body: []byte(`{"type":7}`), want: Result{DeliveryID: id}},
		{name: "tampered body", header: swHdr(id, testNow, sigA), body: append([]byte(nil), strings.Replace(string(body), "paid", "void", 1)...),
			wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "tampered id", header: swHdr("msg_other", testNow, sigA), body: body, wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "tampered timestamp", header: swHdr(id, testNow.Add(time.Second), sigA), body: body, wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "wrong secret", header: swHdr(id, testNow, sigB), body: body, wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "stale timestamp", header: swHdr(id, testNow.Add(-6*time.Minute), libSW(t, swSecretA, false, id, testNow.Add(-6*time.Minute), body)), body: body,
			wantErr: ErrUnauthorized, errText: "timestamp outside tolerance"},
		{name: "future timestamp", header: swHdr(id, testNow.Add(6*time.Minute), libSW(t, swSecretA, false, id, testNow.Add(6*time.Minute), body)), body: body,
			wantErr: ErrUnauthorized, errText: "timestamp outside tolerance"},
		{name: "edge of tolerance past", header: swHdr(id, testNow.Add(-5*time.Minute), libSW(t, swSecretA, false, id, testNow.Add(-5*time.Minute), body)), body: body, want: ok},
		{name: "edge of tolerance future", header: swHdr(id, testNow.Add(5*time.Minute), libSW(t, swSecretA, false, id, testNow.Add(5*time.Minute), body)), body: body, want: ok},
		{name: "custom tolerance", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}, Tolerance: 10 * time.Minute},
			header: swHdr(id, testNow.Add(-9*time.Minute), libSW(t, swSecretA, false, id, testNow.Add(-9*time.Minute), body)), body: body, want: ok},
		{name: "custom tolerance exceeded", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}, Tolerance: 30 * time.Second},
			header: swHdr(id, testNow.Add(-31*time.Second), libSW(t, swSecretA, false, id, testNow.Add(-31*time.Second), body)), body: body,
			wantErr: ErrUnauthorized, errText: "tolerance"},
		{name: "missing signature header", header: hdr("webhook-id", id, "webhook-timestamp", ts), body: body, wantErr: ErrUnauthorized, errText: "missing webhook-signature header"},
		{name: "missing id header", header: hdr("webhook-timestamp", ts, "webhook-signature", sigA), body: body, wantErr: ErrUnauthorized, errText: "missing webhook-id header"},
		{name: "missing svix id header", header: hdr("svix-timestamp", ts, "svix-signature", sigA), body: body, wantErr: ErrUnauthorized, errText: "missing svix-id header"},
		{name: "missing timestamp header", header: hdr("webhook-id", id, "webhook-signature", sigA), body: body, wantErr: ErrUnauthorized, errText: "missing webhook-timestamp header"},
		{name: "no headers", header: http.Header{}, body: body, wantErr: ErrUnauthorized},
		{name: "nil header", header: nil, body: body, wantErr: ErrUnauthorized},
		{name: "malformed timestamp", header: hdr("webhook-id", id, "webhook-timestamp", "17e8", "webhook-signature", sigA), body: body, wantErr: ErrUnauthorized, errText: "malformed webhook-timestamp"},
		{name: "negative timestamp", header: hdr("webhook-id", id, "webhook-timestamp", "-1", "webhook-signature", sigA), body: body, wantErr: ErrUnauthorized, errText: "malformed webhook-timestamp"},
		{name: "huge timestamp", header: hdr("webhook-id", id, "webhook-timestamp", "99999999999999999999999", "webhook-signature", sigA), body: body, wantErr: ErrUnauthorized},
		{name: "malformed signature", header: swHdr(id, testNow, "v1,@@not base64@@"), body: body, wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "signature without version", header: swHdr(id, testNow, strings.TrimPrefix(sigA, "v1,")), body: body, wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "truncated signature", header: swHdr(id, testNow, sigA[:len(sigA)-4]), body: body, wantErr: ErrUnauthorized},
		{name: "only other versions", header: swHdr(id, testNow, "v1a,"+strings.TrimPrefix(sigA, "v1,")+" v2,"+strings.TrimPrefix(sigA, "v1,")), body: body,
			wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "several signatures one matches", header: swHdr(id, testNow, "v1a,AAAA "+sigB+" v1,garbage "+sigA), body: body, want: ok},
		{name: "several signatures none matches", header: swHdr(id, testNow, sigB+" "+libSW(t, swSecretB, false, id, testNow, []byte("x"))), body: body,
			wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "rotated secrets second matches", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA, swSecretB}},
			header: swHdr(id, testNow, sigB), body: body, want: ok},
		{name: "rotated secrets first matches", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretB, swSecretA}},
			header: swHdr(id, testNow, sigA), body: body, want: ok},
		{name: "raw non-whsec key", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{rawSecret}},
			header: swHdr(id, testNow, libSW(t, rawSecret, true, id, testNow, body)), body: body, want: ok},
		{name: "raw key is not base64-decoded", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
			header: swHdr(id, testNow, libSW(t, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false, id, testNow, body)), body: body,
			wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "unpadded whsec secret", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{"whsec_" + base64.RawStdEncoding.EncodeToString([]byte("seventeen bytes!!"))}},
			header: swHdr(id, testNow, libSW(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("seventeen bytes!!")), false, id, testNow, body)), body: body, want: ok},
	}
	runCases(t, def, cases)
}

// TestStandardWebhooksNonCanonicalBase64 checks that a signature whose
// padding bits were flipped (same bytes under lenient decoding) is refused.
func TestStandardWebhooksNonCanonicalBase64(t *testing.T) {
	const id = "msg_1"
	sig := libSW(t, swSecretA, false, id, testNow, eventBody)
	b64 := []byte(strings.TrimPrefix(sig, "v1,"))
	// 32 bytes encode to 43 characters plus "="; the 43rd carries 2 unused bits.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b64[42] = alphabet[strings.IndexByte(alphabet, b64[42])^1]
	v := mustNew(t, Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}})
	_, err := v.Verify(Request{Header: swHdr(id, testNow, "v1,"+string(b64)), Body: eventBody, Now: testNow})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("non-canonical base64 accepted: %v", err)
	}
}

// TestStandardWebhooksSignAcceptedByLibrary checks our Sign against the
// reference library's Verify, with a whsec_ key and with a raw key.
func TestStandardWebhooksSignAcceptedByLibrary(t *testing.T) {
	for _, tc := range []struct {
		secret string
		raw    bool
	}{{swSecretA, false}, {"polar_whs_plainSecretNotBase64!", true}} {
		cfg := Config{Scheme: SchemeStandardWebhooks, Secrets: []string{tc.secret, swSecretB}}
		h, err := Sign(cfg, eventBody, "msg_sign_1", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var wh *standardwebhooks.Webhook
		if tc.raw {
			wh, err = standardwebhooks.NewWebhookRaw([]byte(tc.secret))
		} else {
			wh, err = standardwebhooks.NewWebhook(tc.secret)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(eventBody, h); err != nil {
			t.Fatalf("library rejects our signature (raw=%v): %v", tc.raw, err)
		}
		if err := wh.Verify([]byte(`{"type":"x"}`), h); err == nil {
			t.Fatal("library accepts our signature over another body")
		}
		got, err := mustNew(t, cfg).Verify(Request{Header: h, Body: eventBody})
		if err != nil || got.DeliveryID != "msg_sign_1" {
			t.Fatalf("round trip: %+v, %v", got, err)
		}
	}
}

func TestParseStandardSignaturesCap(t *testing.T) {
	sig := libSW(t, swSecretA, false, "m", testNow, nil)
	var dst [maxSignatures][32]byte
	h := strings.Repeat(sig+" ", maxSignatures+5)
	if n := parseStandardSignatures(h, &dst); n != maxSignatures {
		t.Fatalf("parsed %d signatures, want the cap %d", n, maxSignatures)
	}
}
