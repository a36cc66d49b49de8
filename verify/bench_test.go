package verify

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
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

// hostileMailgunBodies are 1 MiB bodies built to make the scan that finds
// Mailgun's signature, which runs before anything is authenticated, as
// slow as it can be: many keys that must be decoded to be compared (an
// escape, invalid UTF-8), at the top level and inside "signature", whose
// keys are compared with four names. A forged ordinary body, and one of
// the smallest tokens JSON has (what scanning costs without any key to
// compare), are there to compare with.
func hostileMailgunBodies() []struct {
	name string
	body []byte
} {
	const size = 1 << 20
	fill := func(open, key, close string) []byte {
		b := []byte(open)
		for len(b)+len(key)+len(close) < size {
			b = append(b, key...)
		}
		return append(b, close...)
	}
	sig := `"signature":{"timestamp":"1700000000","token":"tok","signature":"` + strings.Repeat("0", 64) + `"}`
	return []struct {
		name string
		body []byte
	}{
		{"ordinary", append(append([]byte(`{`+sig+`,"event-data":`), benchBody(size-len(sig)-16)...), '}')},
		{"dense-array", fill(`{`+sig+`,"event-data":[0`, `,0`, `]}`)},
		{"escaped-keys", fill(`{`+sig, `,"\u0073ignatur\u0065":0`, `}`)},
		{"invalid-utf8-keys", fill(`{`+sig, ",\"\xff\":0", `}`)},
		{"escaped-keys-in-signature", fill(`{"signature":{"timestamp":"1700000000","token":"tok","signature":"`+strings.Repeat("0", 64)+`"`, `,"\u0074oke\u006e":"tok"`, `}}`)},
		{"invalid-utf8-keys-in-signature", fill(`{"signature":{"timestamp":"1700000000","token":"tok","signature":"`+strings.Repeat("0", 64)+`"`, ",\"\xff\xfe\":0", `}}`)},
	}
}

// BenchmarkMailgunForgedHostile measures refusing a forged Mailgun
// delivery of 1 MiB, ordinary and hostile (hostileMailgunBodies), next to
// a forged GitHub delivery of the same size: the cost an attacker can
// impose per request before any signature is checked.
func BenchmarkMailgunForgedHostile(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	v := mustNew(b, Config{Scheme: SchemeMailgun, Secrets: []string{hmacSecretA}})
	for _, c := range hostileMailgunBodies() {
		req := Request{Header: http.Header{}, Body: c.body, Now: now}
		if _, err := v.Verify(req); !errors.Is(err, ErrUnauthorized) {
			b.Fatalf("%s: %v, want a forged signature refused", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				v.Verify(req)
			}
		})
	}
	gh := mustNew(b, Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}})
	body := benchBody(1 << 20)
	h, err := Sign(Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}, body, "d1", now)
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Header: h, Body: append([]byte(nil), body...), Now: now}
	req.Body[len(req.Body)-3] ^= 1
	b.Run("github-forged", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(req.Body)))
		for b.Loop() {
			if _, err := gh.Verify(req); err == nil {
				b.Fatal("forged request accepted")
			}
		}
	})
}
