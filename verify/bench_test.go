package verify

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// benchBody returns a realistic JSON event of exactly n bytes.
func benchBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_1NZ2abcDEF","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","lines":[`)
	for i := 0; b.Len() < n-40; i++ {
		fmt.Fprintf(&b, `{"amount":%d,"currency":"eur","desc":"line %d"},`, 1000+i, i)
	}
	b.WriteString(`{}]}},"livemode":false,"pad":"`)
	for b.Len() < n-2 {
		b.WriteByte('x')
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

type benchSetup struct {
	name      string
	v         Verifier
	req       Request
	maxAllocs int
}

func benchSetups(tb testing.TB) []benchSetup {
	body := benchBody(1024)
	if len(body) != 1024 {
		tb.Fatalf("bench body is %d bytes", len(body))
	}
	now := time.Unix(1_700_000_000, 0)
	cfgs := []struct {
		name      string
		cfg       Config
		maxAllocs int // the returned strings
	}{
		{"standard-webhooks", Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}, 1},
		{"stripe", Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}, 2},
		{"github", Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}, 0},
		{"hmac", Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id"}, 0},
		{"hmac-bodyhash", Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Signature"}, 1},
		{"none-idfield", Config{Scheme: SchemeNone, IDField: "id", TypeField: "type"}, 2},
	}
	var out []benchSetup
	for _, c := range cfgs {
		h, err := Sign(c.cfg, body, "msg_2b7YxqQ8", now)
		if err != nil {
			tb.Fatal(err)
		}
		h.Set("X-GitHub-Event", "push")
		v := mustNew(tb, c.cfg)
		req := Request{Header: h, Body: body, Now: now}
		if _, err := v.Verify(req); err != nil {
			tb.Fatalf("%s: %v", c.name, err)
		}
		out = append(out, benchSetup{c.name, v, req, c.maxAllocs})
	}
	return out
}

// BenchmarkVerify measures one verification of a 1 KiB body per scheme.
func BenchmarkVerify(b *testing.B) {
	for _, s := range benchSetups(b) {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s.req.Body)))
			for b.Loop() {
				if _, err := s.v.Verify(s.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyForged measures rejecting a forged request, the cost an
// attacker can impose.
func BenchmarkVerifyForged(b *testing.B) {
	for _, s := range benchSetups(b) {
		if s.name == "none-idfield" {
			continue
		}
		req := s.req
		req.Body = append([]byte(nil), req.Body...)
		req.Body[len(req.Body)-3] ^= 1
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.v.Verify(req); err == nil {
					b.Fatal("forged request accepted")
				}
			}
		})
	}
}

// BenchmarkJSONFields measures the id/type extraction alone.
func BenchmarkJSONFields(b *testing.B) {
	body := benchBody(1024)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, ok := jsonFields(body, "id", "type"); !ok {
			b.Fatal("not ok")
		}
	}
}
