package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func macWith(h func() hash.Hash, key string, body []byte) []byte {
	m := hmac.New(h, []byte(key))
	m.Write(body)
	return m.Sum(nil)
}

func TestHMACVerify(t *testing.T) {
	body := []byte(`{"id":"ord_1","topic":"orders/create","n":12345,"data":{"id":"inner"}}`)
	hash256 := bodyHash(body)
	hex256 := hex.EncodeToString(macWith(sha256.New, hmacSecretA, body))
	b64256 := base64.StdEncoding.EncodeToString(macWith(sha256.New, hmacSecretA, body))
	shopify := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64",
		IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic"}
	lemon := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Signature"}
	prefixed := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Hub-Signature", Prefix: "sha256=", Encoding: "hex", Algorithm: "sha256"}
	sha1cfg := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Hub-Signature", Prefix: "sha1=", Algorithm: "sha1"}
	sha512cfg := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Algorithm: "sha512", Encoding: "base64"}
	field := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Signature", IDField: "id", TypeField: "topic"}
	numField := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Signature", IDField: "n"}
	missingField := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Signature", IDField: "event_id"}
	rotated := lemon
	rotated.Secrets = []string{hmacSecretB, hmacSecretA}
	typeOnly := lemon
	typeOnly.TypeField = "topic"

	cases := []verifyCase{
		{name: "base64 sha256 with id and type headers", cfg: shopify,
			header: hdr("X-Shopify-Hmac-Sha256", b64256, "X-Shopify-Webhook-Id", "wh-1", "X-Shopify-Topic", "orders/create"), body: body,
			want: Result{DeliveryID: "wh-1", EventType: "orders/create"}},
		{name: "base64 unpadded", cfg: shopify,
			header: hdr("X-Shopify-Hmac-Sha256", strings.TrimRight(b64256, "="), "X-Shopify-Webhook-Id", "wh-1"), body: body,
			want: Result{DeliveryID: "wh-1"}},
		{name: "base64 url alphabet refused", cfg: shopify,
			header: hdr("X-Shopify-Hmac-Sha256", base64.URLEncoding.EncodeToString(macWith(sha256.New, hmacSecretA, []byte("x?>"))), "X-Shopify-Webhook-Id", "wh-1"),
			body:   []byte("x?>"), wantErr: ErrUnauthorized},
		{name: "base64 given hex", cfg: shopify, header: hdr("X-Shopify-Hmac-Sha256", hex256, "X-Shopify-Webhook-Id", "wh-1"), body: body,
			wantErr: ErrUnauthorized, errText: "hmac: malformed X-Shopify-Hmac-Sha256 header"},
		{name: "id header missing", cfg: shopify, header: hdr("X-Shopify-Hmac-Sha256", b64256), body: body,
			wantErr: ErrMalformed, errText: "missing X-Shopify-Webhook-Id header"},
		{name: "id header missing and bad signature", cfg: shopify, header: hdr("X-Shopify-Hmac-Sha256", b64256), body: []byte("other"),
			wantErr: ErrUnauthorized},
		{name: "hex body hash fallback", cfg: lemon, header: hdr("X-Signature", hex256), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "hex upper case", cfg: lemon, header: hdr("X-Signature", strings.ToUpper(hex256)), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "hex tampered body", cfg: lemon, header: hdr("X-Signature", hex256), body: []byte(`{"id":"ord_2"}`),
			wantErr: ErrUnauthorized, errText: "hmac: signature in X-Signature header does not match"},
		{name: "hex wrong secret", cfg: lemon, header: hdr("X-Signature", hex.EncodeToString(macWith(sha256.New, hmacSecretB, body))), body: body,
			wantErr: ErrUnauthorized, errText: "does not match"},
		{name: "rotated secrets second matches", cfg: rotated, header: hdr("X-Signature", hex256), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "missing signature header", cfg: lemon, header: hdr("X-Other", hex256), body: body,
			wantErr: ErrUnauthorized, errText: "hmac: missing X-Signature header"},
		{name: "hex wrong length", cfg: lemon, header: hdr("X-Signature", hex256[:40]), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "hex given base64", cfg: lemon, header: hdr("X-Signature", b64256), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "prefix hex", cfg: prefixed, header: hdr("X-Hub-Signature", "sha256="+hex256), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "prefix missing", cfg: prefixed, header: hdr("X-Hub-Signature", hex256), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "prefix wrong", cfg: prefixed, header: hdr("X-Hub-Signature", "sha1="+hex256), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "sha1", cfg: sha1cfg, header: hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(macWith(sha1.New, hmacSecretA, body))), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "sha1 given sha256", cfg: sha1cfg, header: hdr("X-Hub-Signature", "sha1="+hex256), body: body, wantErr: ErrUnauthorized},
		{name: "sha512 base64", cfg: sha512cfg, header: hdr("X-Sig", base64.StdEncoding.EncodeToString(macWith(sha512.New, hmacSecretA, body))), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true}},
		{name: "sha512 tampered", cfg: sha512cfg, header: hdr("X-Sig", base64.StdEncoding.EncodeToString(macWith(sha512.New, hmacSecretA, body))), body: []byte("x"),
			wantErr: ErrUnauthorized},
		{name: "id field and type field", cfg: field, header: hdr("X-Signature", hex256), body: body,
			want: Result{DeliveryID: "ord_1", EventType: "orders/create"}},
		{name: "numeric id field", cfg: numField, header: hdr("X-Signature", hex256), body: body, want: Result{DeliveryID: "12345"}},
		{name: "id field missing", cfg: missingField, header: hdr("X-Signature", hex256), body: body,
			wantErr: ErrMalformed, errText: `no string or number field "event_id"`},
		{name: "id field body not JSON", cfg: field, header: hdr("X-Signature", hex.EncodeToString(macWith(sha256.New, hmacSecretA, []byte("a=b")))), body: []byte("a=b"),
			wantErr: ErrMalformed, errText: "body is not a JSON object"},
		{name: "type field on non-JSON body", cfg: typeOnly, header: hdr("X-Signature", hex.EncodeToString(macWith(sha256.New, hmacSecretA, []byte("a=b")))), body: []byte("a=b"),
			want: Result{DeliveryID: bodyHash([]byte("a=b")), IDIsHash: true}},
		{name: "type field with hash id", cfg: typeOnly, header: hdr("X-Signature", hex256), body: body,
			want: Result{DeliveryID: hash256, IDIsHash: true, EventType: "orders/create"}},
	}
	runCases(t, Config{}, cases)
}

func TestHMACSignRoundTrip(t *testing.T) {
	body := []byte(`{"event_id":"e-9","kind":"k"}`)
	for _, cfg := range []Config{
		{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig"},
		{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Encoding: "base64", Algorithm: "sha512", IDHeader: "X-Id"},
		{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Prefix: "sha1=", Algorithm: "sha1", IDField: "event_id", TypeField: "kind"},
		{Scheme: SchemeNone, IDHeader: "X-Id"},
		{Scheme: SchemeNone},
	} {
		h, err := Sign(cfg, body, "e-9", time.Time{})
		if err != nil {
			t.Fatalf("%+v: Sign: %v", cfg, err)
		}
		got, err := mustNew(t, cfg).Verify(Request{Header: h, Body: body})
		if err != nil {
			t.Fatalf("%+v: Verify: %v", cfg, err)
		}
		if got.IDIsHash != (cfg.IDHeader == "" && cfg.IDField == "") || (!got.IDIsHash && got.DeliveryID != "e-9") {
			t.Fatalf("%+v: result %+v", cfg, got)
		}
	}
	// The hmac signature Sign writes is the documented encoding.
	h, err := Sign(Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA, hmacSecretB}, Header: "x-sig", Prefix: "sha256="}, body, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("X-Sig"), "sha256="+hex.EncodeToString(macWith(sha256.New, hmacSecretA, body)); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if _, err := Sign(Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", IDHeader: "X-Id"}, body, "", time.Time{}); err == nil {
		t.Fatal("Sign with id_header and no delivery id succeeded")
	}
}

// TestHMACTimestampUnit: a sender that signs a timestamp in milliseconds
// (Webflow: X-Webflow-Timestamp, "{timestamp}:{body}", hex HMAC-SHA256)
// is verified with timestamp_unit: ms, its tolerance judged in
// milliseconds; with seconds, the default, its genuine deliveries are
// refused saying the timestamp is in milliseconds, not that it is out of
// tolerance, and a seconds timestamp sent to an ms source says so too.
func TestHMACTimestampUnit(t *testing.T) {
	body := []byte(`{"triggerType":"form_submission","payload":{"id":"6321ca84df3949bfc6752327"}}`)
	webflow := func(ts int64) http.Header {
		text := strconv.FormatInt(ts, 10)
		return hdr("X-Webflow-Timestamp", text,
			"X-Webflow-Signature", hex.EncodeToString(macWith(sha256.New, hmacSecretA, []byte(text+":"+string(body)))))
	}
	ms := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Webflow-Signature",
		TimestampHeader: "X-Webflow-Timestamp", Signed: "{timestamp}:{body}", TimestampUnit: TimestampMillis}
	secs := ms
	secs.TimestampUnit = ""
	explicitSecs := ms
	explicitSecs.TimestampUnit = TimestampSeconds
	now := testNow.Add(733 * time.Millisecond)
	hash := bodyHash(body)
	ok := Result{DeliveryID: hash, IDIsHash: true}
	const inMillis = "hmac: timestamp is in milliseconds; set timestamp_unit: ms"
	runCases(t, ms, []verifyCase{
		{name: "ms: now", header: webflow(now.UnixMilli()), body: body, now: now, want: ok},
		{name: "ms: at the edge of the tolerance", header: webflow(now.Add(-DefaultTolerance).UnixMilli()), body: body, now: now, want: ok},
		{name: "ms: a millisecond past it", header: webflow(now.Add(-DefaultTolerance - time.Millisecond).UnixMilli()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: "hmac: timestamp outside tolerance"},
		{name: "ms: future", header: webflow(now.Add(DefaultTolerance + time.Second).UnixMilli()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: "hmac: timestamp outside tolerance"},
		{name: "ms: tampered", header: webflow(now.UnixMilli()), body: []byte(string(body) + " "), now: now,
			wantErr: ErrUnauthorized, errText: "does not match"},
		{name: "ms: sent in seconds", header: webflow(now.Unix()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: "hmac: timestamp is in seconds, not milliseconds; set timestamp_unit: s (or leave it out)"},
		{name: "s: a genuine ms delivery", cfg: secs, header: webflow(now.UnixMilli()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: inMillis},
		{name: "explicit s: a genuine ms delivery", cfg: explicitSecs, header: webflow(now.UnixMilli()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: inMillis},
		{name: "s: seconds", cfg: secs, header: webflow(now.Unix()), body: body, now: now, want: ok},
		{name: "s: seconds out of tolerance", cfg: secs, header: webflow(now.Add(-time.Hour).Unix()), body: body, now: now,
			wantErr: ErrUnauthorized, errText: "hmac: timestamp outside tolerance"},
		{name: "s: the year 5138 is still seconds", cfg: secs, header: webflow(unitBound), body: body, now: now,
			wantErr: ErrUnauthorized, errText: "hmac: timestamp outside tolerance"},
	})
	// The refusal names no secret and no signature, and CheckHeader gives it.
	h := webflow(now.UnixMilli())
	_, err := mustNew(t, secs).Verify(Request{Header: h, Body: body, Now: now})
	if err == nil || err.Error() != inMillis || strings.Contains(err.Error(), hmacSecretA) || strings.Contains(err.Error(), h.Get("X-Webflow-Signature")) {
		t.Fatalf("Verify = %v, want exactly %q", err, inMillis)
	}
	// Sign (hookbox send) signs in the source's unit: 13 digits, over
	// "{timestamp}:{body}", as the test above signs by hand.
	signed, err := Sign(ms, body, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := signed.Get("X-Webflow-Timestamp"), strconv.FormatInt(now.UnixMilli(), 10); got != want || len(got) != 13 {
		t.Fatalf("Sign's timestamp %q, want %q", got, want)
	}
	if got, want := signed.Get("X-Webflow-Signature"), webflow(now.UnixMilli()).Get("X-Webflow-Signature"); got != want {
		t.Fatalf("Sign's signature %q, want %q", got, want)
	}
	if _, err := mustNew(t, ms).Verify(Request{Header: signed, Body: body, Now: now}); err != nil {
		t.Fatalf("Verify(Sign) = %v", err)
	}
	if signed, err = Sign(secs, body, "", now); err != nil || len(signed.Get("X-Webflow-Timestamp")) != 10 {
		t.Fatalf("Sign in seconds: %v, timestamp %q", err, signed.Get("X-Webflow-Timestamp"))
	}
}
