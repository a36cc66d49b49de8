package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stripe/stripe-go/v82/webhook"
)

// The fuzz targets check properties, not just the absence of panics: each
// parser must accept exactly the inputs a simple reference accepts. Seed
// corpora live in testdata/fuzz/<FuzzName>/; run one with, for example,
//
//	go test ./verify/ -run '^$' -fuzz '^FuzzStripeSignature$' -fuzztime 20s

const fuzzID = "msg_fuzz"

var fuzzBody = []byte(`{"id":"evt_fuzz","type":"fuzz.test"}`)

func fuzzTS() string { return strconv.FormatInt(testNow.Unix(), 10) }

// Expected signatures over fuzzBody, computed by hand.
func fuzzSWSig() string {
	return "v1," + base64.StdEncoding.EncodeToString(mac256(swKeyA, []byte(fuzzID+"."+fuzzTS()+"."+string(fuzzBody))))
}
func fuzzStripeHex() string { return hexMAC(stripeSecretA, []byte(fuzzTS()+"."+string(fuzzBody))) }
func fuzzGitHubHex() string { return hexMAC(ghSecretA, fuzzBody) }

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// checkErr fails when err wraps no sentinel or leaks the secret or the
// expected signature.
func checkErr(t *testing.T, err error, secret string, expected ...string) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrMalformed) {
		t.Fatalf("error %q wraps no sentinel", err)
	}
	for _, s := range append(expected, secret) {
		if s != "" && strings.Contains(asciiLower(err.Error()), asciiLower(s)) {
			t.Fatalf("error %q leaks %q", err, s)
		}
	}
}

func swFuzzSeeds() []string {
	sig := fuzzSWSig()
	other := "v1," + base64.StdEncoding.EncodeToString(mac256(swKeyB, []byte("x")))
	return []string{
		sig,
		"  " + sig + "\t",
		"v1a,AAAA " + other + " " + sig,
		other,
		"v1," + strings.TrimSuffix(strings.TrimPrefix(sig, "v1,"), "="),
		"v1,",
		"v2," + strings.TrimPrefix(sig, "v1,"),
		"",
		strings.Repeat(other+" ", maxSignatures) + sig,
	}
}

func FuzzStandardWebhooksSignature(f *testing.F) {
	for _, s := range swFuzzSeeds() {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretB, swSecretA}})
	expected := fuzzSWSig()
	f.Fuzz(func(t *testing.T, sigHeader string) {
		h := hdr("webhook-id", fuzzID, "webhook-timestamp", fuzzTS())
		h["Webhook-Signature"] = []string{sigHeader}
		res, err := v.Verify(Request{Header: h, Body: fuzzBody, Now: testNow})
		checkErr(t, err, swSecretA, expected, strings.TrimPrefix(expected, "v1,"))
		checkHeaderAgrees(t, v, Request{Header: h, Now: testNow}, err)
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("error %q is not ErrUnauthorized", err)
		}
		tokens := strings.FieldsFunc(strings.TrimSpace(sigHeader), func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
		present := slices.Contains(tokens, expected)
		if err == nil && (!present || res.DeliveryID != fuzzID || res.EventType != "fuzz.test") {
			t.Fatalf("accepted %q (result %+v) without the expected signature", sigHeader, res)
		}
		if err != nil && present && len(tokens) <= maxSignatures {
			t.Fatalf("rejected %q holding the expected signature: %v", sigHeader, err)
		}
		// Every signature the parser yields is the canonical decoding of
		// one v1 token of the header.
		var dst [maxSignatures][32]byte
		n := parseStandardSignatures(sigHeader, &dst)
		for i := 0; i < n; i++ {
			if tok := "v1," + base64.StdEncoding.EncodeToString(dst[i][:]); !slices.Contains(tokens, tok) {
				t.Fatalf("parser yielded %q, not a token of %q", tok, sigHeader)
			}
		}
	})
}

func stripeFuzzSeeds() []string {
	ts, sig := fuzzTS(), fuzzStripeHex()
	return []string{
		"t=" + ts + ",v1=" + sig,
		"t=" + ts + ",v1=" + strings.Repeat("0", 64) + ",v1=" + sig + ",v0=abc",
		" t = " + ts + " , v1 = " + strings.ToUpper(sig) + " ,",
		"t=0" + ts + ",v1=" + sig,
		"t=+" + ts + ",v1=" + sig,
		"t=" + ts + ",t=" + ts + ",v1=" + sig,
		"v1=" + sig,
		"t=" + ts,
		"t=" + ts + ",v1=" + sig + "=",
		"garbage",
		"",
		",,,=",
	}
}

func FuzzStripeSignature(f *testing.F) {
	for _, s := range stripeFuzzSeeds() {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretB, stripeSecretA}})
	expected := fuzzStripeHex()
	f.Fuzz(func(t *testing.T, sigHeader string) {
		res, err := v.Verify(Request{Header: hdr("Stripe-Signature", sigHeader), Body: fuzzBody, Now: testNow})
		checkErr(t, err, stripeSecretA, expected)
		checkHeaderAgrees(t, v, Request{Header: hdr("Stripe-Signature", sigHeader), Now: testNow}, err)
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("error %q is not ErrUnauthorized", err)
		}
		// Reference reading of the header.
		parts := strings.Split(sigHeader, ",")
		tCount, tOK, sigOK := 0, false, false
		for _, p := range parts {
			k, val, _ := strings.Cut(p, "=")
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			switch k {
			case "t":
				tCount++
				n, perr := strconv.ParseInt(val, 10, 64)
				tOK = perr == nil && n == testNow.Unix() && val[0] != '+' && val[0] != '-'
			case "v1":
				sigOK = sigOK || asciiLower(val) == expected
			}
		}
		if err == nil && (!(tCount == 1 && tOK && sigOK) || res.DeliveryID != "evt_fuzz") {
			t.Fatalf("accepted %q (result %+v)", sigHeader, res)
		}
		// Whatever stripe-go accepts, we accept too, provided the header
		// has one plain-digit timestamp and few enough entries.
		if err != nil && tCount == 1 && len(parts) <= maxSignatures &&
			webhook.ValidatePayloadIgnoringTolerance(fuzzBody, sigHeader, stripeSecretA) == nil {
			ts := ""
			for _, p := range parts {
				if k, val, _ := strings.Cut(p, "="); strings.TrimSpace(k) == "t" {
					ts = strings.TrimSpace(val)
				}
			}
			if n, ok := parseUnix(ts); ok && withinTolerance(n, testNow, DefaultTolerance) {
				t.Fatalf("stripe-go accepts %q, we reject it: %v", sigHeader, err)
			}
		}
	})
}

func githubFuzzSeeds() []string {
	sig := fuzzGitHubHex()
	return []string{
		"sha256=" + sig,
		" sha256=" + strings.ToUpper(sig) + " ",
		"sha256=" + sig[:63],
		"sha256=" + sig + "0",
		"sha1=" + sig[:40],
		"SHA256=" + sig,
		"sha256= " + sig,
		"",
	}
}

func FuzzGitHubSignature(f *testing.F) {
	for _, s := range githubFuzzSeeds() {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretB, ghSecretA}})
	expected := fuzzGitHubHex()
	f.Fuzz(func(t *testing.T, sigHeader string) {
		h := hdr("X-GitHub-Delivery", "d-1")
		h["X-Hub-Signature-256"] = []string{sigHeader}
		_, err := v.Verify(Request{Header: h, Body: fuzzBody})
		checkErr(t, err, ghSecretA, expected)
		checkHeaderAgrees(t, v, Request{Header: h}, err)
		rest, ok := strings.CutPrefix(strings.TrimSpace(sigHeader), "sha256=")
		want := ok && asciiLower(rest) == expected
		if (err == nil) != want {
			t.Fatalf("header %q: accepted=%v, want %v (err %v)", sigHeader, err == nil, want, err)
		}
	})
}

func hmacFuzzSeeds() []struct {
	h   string
	b64 bool
} {
	hexSig := "sha256=" + hexMAC(hmacSecretA, fuzzBody)
	b64 := base64.StdEncoding.EncodeToString(mac256([]byte(hmacSecretA), fuzzBody))
	return []struct {
		h   string
		b64 bool
	}{
		{hexSig, false}, {strings.ToUpper(hexSig), false}, {"sha256= " + hexSig[7:] + " ", false}, {hexSig[7:], false},
		{b64, true}, {strings.TrimRight(b64, "="), true}, {" " + b64, true}, {b64[:40], true}, {hexSig, true},
	}
}

func FuzzHMACSignature(f *testing.F) {
	for _, s := range hmacFuzzSeeds() {
		f.Add(s.h, s.b64)
	}
	vHex := mustNew(f, Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretB, hmacSecretA}, Header: "X-Sig", Prefix: "sha256=", IDField: "id"})
	vB64 := mustNew(f, Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Encoding: "base64", IDField: "id"})
	mac := mac256([]byte(hmacSecretA), fuzzBody)
	f.Fuzz(func(t *testing.T, sigHeader string, useB64 bool) {
		v, prefix := vHex, "sha256="
		if useB64 {
			v, prefix = vB64, ""
		}
		h := hdr()
		h["X-Sig"] = []string{sigHeader}
		res, err := v.Verify(Request{Header: h, Body: fuzzBody})
		checkErr(t, err, hmacSecretA, hex.EncodeToString(mac), base64.RawStdEncoding.EncodeToString(mac))
		checkHeaderAgrees(t, v, Request{Header: h}, err)
		rest, ok := strings.CutPrefix(strings.TrimSpace(sigHeader), prefix)
		rest = strings.TrimSpace(rest)
		want := ok && asciiLower(rest) == hex.EncodeToString(mac)
		if useB64 {
			want = ok && (rest == base64.StdEncoding.EncodeToString(mac) || rest == base64.RawStdEncoding.EncodeToString(mac))
		}
		if (err == nil) != want {
			t.Fatalf("header %q (base64=%v): accepted=%v, want %v (err %v)", sigHeader, useB64, err == nil, want, err)
		}
		if err == nil && res.DeliveryID != "evt_fuzz" {
			t.Fatalf("result %+v", res)
		}
	})
}

func FuzzParseUnix(f *testing.F) {
	for _, s := range []string{"1700000000", "0", "", "-1", "+1", "1e9", "999999999999999999", "9999999999999999999", " 1", "01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseUnix(s)
		digits := len(s) > 0 && len(s) <= 18 && strings.Trim(s, "0123456789") == ""
		if ok != digits {
			t.Fatalf("parseUnix(%q) ok = %v, want %v", s, ok, digits)
		}
		if ok {
			if want, err := strconv.ParseInt(s, 10, 64); err != nil || want != n {
				t.Fatalf("parseUnix(%q) = %d, strconv says %d, %v", s, n, want, err)
			}
		}
	})
}

// FuzzHMACTimestampUnit: an hmac source's signed timestamp is judged in
// its unit, seconds or milliseconds, against integer bounds; a refused one
// is said to be in the other unit exactly when it is past 10^11 read as
// seconds, or short of it read as milliseconds.
func FuzzHMACTimestampUnit(f *testing.F) {
	for _, s := range []string{"1700000000", "1700000000000", "1699999700", "1699999699", "1700000300000", "1700000300001",
		"100000000000", "100000000001", "99999999999", "0", "", "-1", "17000000001234567", "999999999999999999"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	cfg := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", TimestampHeader: "X-Ts", Signed: "{timestamp}:{body}"}
	vS := mustNew(f, cfg)
	cfg.TimestampUnit = TimestampMillis
	vMS := mustNew(f, cfg)
	sig := hex.EncodeToString(mac256([]byte(hmacSecretB), fuzzBody))
	nowS := testNow.Unix() // testNow is a whole second
	tolS := int64(DefaultTolerance / time.Second)
	f.Fuzz(func(t *testing.T, ts string, ms bool) {
		v, now, tol := vS, nowS, tolS
		if ms {
			v, now, tol = vMS, nowS*1000, tolS*1000
		}
		h := hdr("X-Sig", sig)
		h["X-Ts"] = []string{ts}
		err := v.CheckHeader(Request{Header: h, Now: testNow})
		checkErr(t, err, hmacSecretA, sig)
		text := strings.TrimSpace(ts)
		n, perr := strconv.ParseInt(text, 10, 64)
		digits := text != "" && len(text) <= 18 && strings.Trim(text, "0123456789") == "" && perr == nil
		var want string
		switch {
		case text == "":
			want = "hmac: missing X-Ts header"
		case !digits:
			want = "hmac: malformed X-Ts header"
		case n >= now-tol && n <= now+tol:
			want = ""
		case ms && n < unitBound:
			want = "hmac: timestamp is in seconds, not milliseconds; set timestamp_unit: s (or leave it out)"
		case !ms && n > unitBound:
			want = "hmac: timestamp is in milliseconds; set timestamp_unit: ms"
		default:
			want = "hmac: timestamp outside tolerance"
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Fatalf("timestamp %q (ms=%v): CheckHeader = %q, want %q", ts, ms, got, want)
		}
	})
}

func jsonFuzzSeeds() []struct {
	data []byte
	key  string
} {
	return []struct {
		data []byte
		key  string
	}{
		{eventBody, "type"},
		{[]byte(`{"event_id":12,"id":"a","id":"b"}`), "event_id"},
		{[]byte(`{"\u0069d":"x","k\u00e9y":[1,{"a":null}]}`), "kéy"},
		{[]byte(" {\"a\" : -0.5e-3 , \"b\":true,\"c\":false}\n"), "a"},
		{[]byte("{\"\xff\":\"bad utf8\",\"s\":\"\xfe\"}"), "\uFFFD"},
		{[]byte(`{"id":"x",}`), "id"},
		{[]byte(`[1,2]`), "id"},
		{[]byte(`null`), ""},
		{[]byte(`{"id":"\ud800"}`), "id"},
	}
}

func FuzzJSONFields(f *testing.F) {
	for _, s := range jsonFuzzSeeds() {
		f.Add(s.data, s.key)
	}
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		a, b, ok := jsonFields(data, key, "id")
		var m map[string]json.RawMessage
		refOK := json.Unmarshal(data, &m) == nil && m != nil
		if ok != refOK {
			t.Fatalf("jsonFields(%q) ok = %v, encoding/json says %v", data, ok, refOK)
		}
		if !ok {
			if a != nil || b != nil {
				t.Fatalf("values returned for invalid input %q", data)
			}
			return
		}
		check := func(name string, got []byte) {
			want, present := m[name]
			if name == "" { // an empty name is never looked for
				want, present = nil, false
			}
			if present != (got != nil) || !bytes.Equal(got, want) {
				t.Fatalf("jsonFields(%q)[%q] = %q, encoding/json says %q (present %v)", data, name, got, want, present)
			}
			if !present {
				return
			}
			// jsonString agrees with encoding/json on text that is UTF-8;
			// where encoding/json put U+FFFD for bytes that are not (or a
			// lone surrogate), jsonString keeps bytes that are not UTF-8.
			same := func(gs, ws string) bool {
				if utf8.ValidString(gs) {
					return gs == ws
				}
				return strings.ContainsRune(ws, utf8.RuneError)
			}
			gs, gok := jsonString(got)
			var ws string
			wok := want[0] == '"' && json.Unmarshal(want, &ws) == nil
			if !same(gs, ws) || gok != wok {
				t.Fatalf("jsonString(%q) = %q, %v; encoding/json says %q, %v", got, gs, gok, ws, wok)
			}
			txt, tok := jsonScalarText(got)
			if c := want[0]; c == '-' || (c >= '0' && c <= '9') {
				ws, wok = string(want), true
			}
			if !same(txt, ws) || tok != wok {
				t.Fatalf("jsonScalarText(%q) = %q, %v; want %q, %v", got, txt, tok, ws, wok)
			}
		}
		check(key, a)
		check("id", b)
	})
}

// FuzzKeyEquals checks keyEquals, which compares a key of an
// unauthenticated body without decoding it whole, against encoding/json's
// decoding of the same string token: on every token skipString accepts
// (exactly those encoding/json accepts), the key equals its decoding and
// not a name next to it (cut short, lengthened, a byte changed), and the
// fuzzer's name exactly when that is the decoding. Escapes, surrogate
// pairs and lone surrogates, and invalid UTF-8 (decoded to U+FFFD byte by
// byte) are in the seeds.
func FuzzKeyEquals(f *testing.F) {
	for _, s := range []struct{ inner, name string }{
		{`\u0073ignatur\u0065`, "signature"},
		{"\xff", "\uFFFD"},
		{"\xff\xfe", "token"},
		{"\xe2\x82", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xef\xbf\xbd", "\uFFFD"},
		{`\ud83d\ude00`, "\U0001F600"},
		{`\ud83d`, "\uFFFD"},
		{`\ud83dx`, "\uFFFDx"},
		{`\ude00\ud83d`, "\uFFFD\uFFFD"},
		{`\ud83d\u0041`, "\uFFFDA"},
		{`\ud83d\ud83d\ude00`, "\uFFFD\U0001F600"},
		{`a\"b\\c\/d\b\f\n\r\t`, "a\"b\\c/d\b\f\n\r\t"},
		{`\u0000\u00e9\u20AC`, "\x00é€"},
		{`caf\u00e9 ü`, "café ü"},
		{`\'`, "'"},
		{`plain`, "plain"},
		{``, ""},
	} {
		f.Add([]byte(s.inner), s.name)
	}
	f.Fuzz(func(t *testing.T, inner []byte, name string) {
		tok := append(append([]byte{'"'}, inner...), '"')
		s := jsonScanner{data: tok}
		escaped, ok := s.skipString()
		var want string
		refOK := json.Unmarshal(tok, &want) == nil
		if (ok && s.pos == len(tok)) != refOK {
			t.Fatalf("skipString(%q) = %v at %d of %d; encoding/json accepts it: %v", tok, ok, s.pos, len(tok), refOK)
		}
		if !refOK {
			return
		}
		check := func(n string) {
			if got := keyEquals(tok, escaped, n); got != (n == want) {
				t.Fatalf("keyEquals(%q, %q) = %v; encoding/json decodes the key to %q", tok, n, got, want)
			}
		}
		check(name)
		check(want)
		check(want + "x")
		check(want + "\uFFFD")
		if want != "" {
			check(want[:len(want)-1])
			check(want[1:])
			b := []byte(want)
			b[len(b)/2] ^= 1
			check(string(b))
		}
	})
}
