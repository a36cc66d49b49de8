package verify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// libStripe signs with stripe-go and returns the Stripe-Signature value.
func libStripe(secret string, ts time.Time, body []byte) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts}).Header
}

func stripeHdr(v string) map[string][]string { return hdr("Stripe-Signature", v) }

func TestStripeVerify(t *testing.T) {
	body := eventBody
	sigA := libStripe(stripeSecretA, testNow, body)
	sigB := libStripe(stripeSecretB, testNow, body)
	v1B := strings.SplitN(sigB, ",", 2)[1] // "v1=<hex>"
	ts := fmt.Sprint(testNow.Unix())
	hexA := strings.TrimPrefix(strings.SplitN(sigA, ",", 2)[1], "v1=")
	def := Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}
	ok := Result{DeliveryID: "evt_1NZ2abc", EventType: "invoice.paid"}
	signed := func(b string) verifyCase {
		return verifyCase{header: stripeHdr(libStripe(stripeSecretA, testNow, []byte(b))), body: []byte(b)}
	}
	withCase := func(c verifyCase, name string, wantErr error, errText string, want Result) verifyCase {
		c.name, c.wantErr, c.errText, c.want = name, wantErr, errText, want
		return c
	}

	cases := []verifyCase{
		{name: "valid", header: stripeHdr(sigA), body: body, want: ok},
		{name: "valid with v0 and spaces", header: stripeHdr(" t=" + ts + " , v1=" + hexA + " ,v0=deadbeef, "), body: body, want: ok},
		{name: "upper-case hex", header: stripeHdr("t=" + ts + ",v1=" + strings.ToUpper(hexA)), body: body, want: ok},
		{name: "tampered body", header: stripeHdr(sigA), body: []byte(strings.Replace(string(body), "evt_1", "evt_2", 1)),
			wantErr: ErrUnauthorized, errText: "stripe: no v1 signature matches"},
		{name: "tampered timestamp", header: stripeHdr(strings.Replace(sigA, "t="+ts, fmt.Sprintf("t=%d", testNow.Unix()+1), 1)), body: body,
			wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "wrong secret", header: stripeHdr(sigB), body: body, wantErr: ErrUnauthorized, errText: "no v1 signature matches"},
		{name: "stale timestamp", header: stripeHdr(libStripe(stripeSecretA, testNow.Add(-301*time.Second), body)), body: body,
			wantErr: ErrUnauthorized, errText: "stripe: timestamp outside tolerance"},
		{name: "future timestamp", header: stripeHdr(libStripe(stripeSecretA, testNow.Add(301*time.Second), body)), body: body,
			wantErr: ErrUnauthorized, errText: "stripe: timestamp outside tolerance"},
		{name: "within tolerance", header: stripeHdr(libStripe(stripeSecretA, testNow.Add(-299*time.Second), body)), body: body, want: ok},
		{name: "custom tolerance", cfg: Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}, Tolerance: time.Hour},
			header: stripeHdr(libStripe(stripeSecretA, testNow.Add(-50*time.Minute), body)), body: body, want: ok},
		{name: "missing header", header: hdr("X-Other", "1"), body: body, wantErr: ErrUnauthorized, errText: "missing Stripe-Signature header"},
		{name: "empty header", header: stripeHdr("  "), body: body, wantErr: ErrUnauthorized, errText: "missing Stripe-Signature header"},
		{name: "garbage header", header: stripeHdr("garbage"), body: body, wantErr: ErrUnauthorized, errText: "malformed Stripe-Signature"},
		{name: "bad timestamp", header: stripeHdr("t=abc,v1=" + hexA), body: body, wantErr: ErrUnauthorized, errText: "malformed Stripe-Signature"},
		{name: "signed timestamp", header: stripeHdr("t=+" + ts + ",v1=" + hexA), body: body, wantErr: ErrUnauthorized, errText: "malformed Stripe-Signature"},
		{name: "duplicate timestamp", header: stripeHdr("t=1,t=" + ts + ",v1=" + hexA), body: body, wantErr: ErrUnauthorized, errText: "malformed Stripe-Signature"},
		{name: "no timestamp", header: stripeHdr("v1=" + hexA), body: body, wantErr: ErrUnauthorized, errText: "no timestamp"},
		{name: "no v1", header: stripeHdr("t=" + ts + ",v0=" + hexA), body: body, wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "v1 not hex", header: stripeHdr("t=" + ts + ",v1=" + strings.Repeat("zz", 32)), body: body, wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "v1 short", header: stripeHdr("t=" + ts + ",v1=" + hexA[:62]), body: body, wantErr: ErrUnauthorized, errText: "no valid v1 signature"},
		{name: "several v1 one matches", header: stripeHdr(sigB + ",v1=" + strings.Repeat("0", 64) + ",v1=" + hexA), body: body, want: ok},
		{name: "several v1 none matches", header: stripeHdr(sigB + ",v1=" + strings.Repeat("0", 64)), body: body, wantErr: ErrUnauthorized},
		{name: "rotated secrets second matches", cfg: Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA, stripeSecretB}},
			header: stripeHdr("t=" + ts + "," + v1B), body: body, want: ok},
		{name: "secret used as-is not decoded", cfg: Config{Scheme: SchemeStripe, Secrets: []string{swSecretA}},
			header: stripeHdr(libStripe(swSecretA, testNow, body)), body: body, want: ok},
		withCase(signed("not json"), "body not JSON", ErrMalformed, "stripe: body is not a JSON object", Result{}),
		withCase(signed(`["evt_1"]`), "body a JSON array", ErrMalformed, "not a JSON object", Result{}),
		withCase(signed(`{"id":"evt_1"`), "body truncated JSON", ErrMalformed, "not a JSON object", Result{}),
		withCase(signed(`{"object":"event","type":"a.b"}`), "body without id", ErrMalformed, `no "id" string`, Result{}),
		withCase(signed(`{"id":"","type":"a.b"}`), "empty id", ErrMalformed, `no "id" string`, Result{}),
		withCase(signed(`{"id":42,"type":"a.b"}`), "numeric id", ErrMalformed, `no "id" string`, Result{}),
		withCase(signed(`{"data":{"id":"evt_nested"}}`), "nested id only", ErrMalformed, `no "id" string`, Result{}),
		withCase(signed(`{"id":"evt_1","type":null}`), "null type", nil, "", Result{DeliveryID: "evt_1"}),
		withCase(signed(`{"id":"evt_\u00e9\n","type":"a"}`), "escaped id", nil, "", Result{DeliveryID: "evt_é\n", EventType: "a"}),
		withCase(signed(`{"id":"evt_old","id":"evt_new"}`), "duplicate id last wins", nil, "", Result{DeliveryID: "evt_new"}),
		{name: "not JSON and unsigned is unauthorized", header: stripeHdr(sigB), body: []byte("not json"), wantErr: ErrUnauthorized},
	}
	runCases(t, def, cases)
}

// TestStripeSignAcceptedByLibrary checks our Sign against stripe-go's own
// verification functions.
func TestStripeSignAcceptedByLibrary(t *testing.T) {
	cfg := Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA, stripeSecretB}}
	h, err := Sign(cfg, eventBody, "ignored", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	sig := h.Get("Stripe-Signature")
	if err := webhook.ValidatePayload(eventBody, sig, stripeSecretA); err != nil {
		t.Fatalf("ValidatePayload rejects our signature: %v", err)
	}
	ev, err := webhook.ConstructEventWithOptions(eventBody, sig, stripeSecretA, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		t.Fatalf("ConstructEventWithOptions rejects our signature: %v", err)
	}
	if ev.ID != "evt_1NZ2abc" {
		t.Fatalf("event id %q", ev.ID)
	}
	if err := webhook.ValidatePayload(eventBody, sig, stripeSecretB); err == nil {
		t.Fatal("stripe-go accepts our signature under the second secret; Sign must use Secrets[0]")
	}
	if err := webhook.ValidatePayload([]byte(`{"id":"evt_x"}`), sig, stripeSecretA); err == nil {
		t.Fatal("stripe-go accepts our signature over another body")
	}
	got, err := mustNew(t, cfg).Verify(Request{Header: h, Body: eventBody})
	if err != nil || got.DeliveryID != "evt_1NZ2abc" || got.EventType != "invoice.paid" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}
