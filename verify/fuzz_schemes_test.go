package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Fuzz targets for the parsers the provider presets brought: each checks a
// property against a simple reference, not only the absence of panics.
// `go test` runs the seeds; run one for longer with, for example,
//
//	go test ./verify/ -run '^$' -fuzz '^FuzzPaddleSignature$' -fuzztime 20s

func FuzzSignedTemplate(f *testing.F) {
	for _, s := range []string{"", "{body}", "v0:{timestamp}:{body}", "{url}{body}", "{timestamp}{body}", "{body}{body}", "{ts}{body}", "}{body}", "{", "a{url}b{timestamp}c{body}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		parts, err := parseSignedTemplate(tmpl)
		if err != nil {
			return
		}
		// Rendering the parts back gives the template.
		var b strings.Builder
		for _, p := range parts {
			switch p.kind {
			case partLiteral:
				if strings.ContainsAny(p.text, "{}") || p.text == "" {
					t.Fatalf("literal %q of %q", p.text, tmpl)
				}
				b.WriteString(p.text)
			case partTimestamp:
				b.WriteString("{timestamp}")
			case partURL:
				b.WriteString("{url}")
			}
		}
		if tmpl != "" {
			b.WriteString("{body}")
		}
		if b.String() != tmpl {
			t.Fatalf("parts of %q render as %q", tmpl, b.String())
		}
	})
}

func FuzzPaddleSignature(f *testing.F) {
	ts := fuzzTS()
	sig := hexMAC(hmacSecretA, []byte(ts+":"+string(fuzzBody)))
	for _, s := range []string{"ts=" + ts + ";h1=" + sig, " ts = " + ts + " ; h1=" + strings.ToUpper(sig) + ";", "ts=" + ts + ";h1=" + strings.Repeat("0", 64) + ";h1=" + sig,
		"ts=" + ts + ";ts=" + ts + ";h1=" + sig, "h1=" + sig, "ts=" + ts, "ts=" + ts + "," + "h1=" + sig, "", ";;=", "ts=-1;h1=" + sig} {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemePaddle, Secrets: []string{hmacSecretB, hmacSecretA}, IDField: "id"})
	f.Fuzz(func(t *testing.T, sigHeader string) {
		h := http.Header{"Paddle-Signature": {sigHeader}}
		res, err := v.Verify(Request{Header: h, Body: fuzzBody, Now: testNow})
		checkErr(t, err, hmacSecretA, sig)
		checkHeaderAgrees(t, v, Request{Header: h, Now: testNow}, err)
		// Reference: ";"-separated key=value pairs, exactly one plain-digit
		// ts, and the expected h1 among at most maxSignatures.
		tsCount, tsOK, sigOK, malformed, h1s := 0, false, false, false, 0
		for _, p := range strings.Split(strings.TrimSpace(sigHeader), ";") {
			if strings.TrimSpace(p) == "" {
				continue
			}
			k, val, ok := strings.Cut(p, "=")
			malformed = malformed || !ok
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			switch k {
			case "ts":
				tsCount++
				tsOK = val == ts
			case "h1":
				if len(val) == 64 {
					if _, herr := hex.DecodeString(val); herr == nil {
						h1s++
						sigOK = sigOK || (asciiLower(val) == sig && h1s <= maxSignatures)
					}
				}
			}
		}
		want := !malformed && tsCount == 1 && tsOK && sigOK
		if (err == nil) != want {
			t.Fatalf("header %q: accepted=%v, want %v (err %v)", sigHeader, err == nil, want, err)
		}
		if err == nil && res.DeliveryID != "evt_fuzz" {
			t.Fatalf("result %+v", res)
		}
	})
}

func FuzzStandardV1a(f *testing.F) {
	sig := v1aSig(v1aPrivA, fuzzID, testNow, fuzzBody)
	other := v1aSig(v1aPrivB, fuzzID, testNow, fuzzBody)
	for _, s := range []string{sig, other + " " + sig, "v1," + strings.TrimPrefix(sig, "v1a,"), sig[:20], strings.TrimRight(sig, "="), " \t" + sig, strings.Repeat(other+" ", maxSignatures) + sig, ""} {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA, whpkB, whpkA}})
	f.Fuzz(func(t *testing.T, sigHeader string) {
		h := hdr("webhook-id", fuzzID, "webhook-timestamp", fuzzTS())
		h["Webhook-Signature"] = []string{sigHeader}
		_, err := v.Verify(Request{Header: h, Body: fuzzBody, Now: testNow})
		checkErr(t, err, swSecretA, sig, strings.TrimPrefix(sig, "v1a,"))
		checkHeaderAgrees(t, v, Request{Header: h, Now: testNow}, err)
		tokens := strings.FieldsFunc(sigHeader, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
		var v1a []string
		for _, tok := range tokens {
			if b, ok := strings.CutPrefix(tok, "v1a,"); ok {
				if d, derr := base64.StdEncoding.Strict().DecodeString(b); derr == nil && len(d) == ed25519.SignatureSize {
					v1a = append(v1a, tok)
				}
			}
		}
		// Every decoded v1a entry is a canonical token of the header.
		var dst [maxV1a][ed25519.SignatureSize]byte
		n := parseStandardV1a(sigHeader, &dst)
		if n != min(len(v1a), maxV1a) {
			t.Fatalf("parsed %d v1a entries of %q, reference %d", n, sigHeader, len(v1a))
		}
		for i := 0; i < n; i++ {
			if tok := "v1a," + base64.StdEncoding.EncodeToString(dst[i][:]); tok != v1a[i] {
				t.Fatalf("entry %d = %q, want %q", i, tok, v1a[i])
			}
		}
		if slices.Contains(v1a[:n], sig) && err != nil {
			t.Fatalf("rejected %q holding a good v1a signature: %v", sigHeader, err)
		}
	})
}

func FuzzBasicAuth(f *testing.F) {
	for _, s := range []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("u:p")), "basic dTpw", "BASIC  dTpw ", "Basic dTp", "Basic", "Bearer dTpw", "Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")), ""} {
		f.Add(s)
	}
	v := mustNew(f, Config{Scheme: SchemeBasic, Secrets: []string{"u:p"}})
	f.Fuzz(func(t *testing.T, h string) {
		creds, ok := parseBasicAuth(h)
		// Reference: net/http's reading of the same header.
		r := &http.Request{Header: http.Header{"Authorization": {h}}}
		user, pass, refOK := r.BasicAuth()
		if ok && len(h) > 6 && strings.TrimSpace(h[6:]) == h[6:] && (!refOK || string(creds) != user+":"+pass) {
			t.Fatalf("%q: parsed %q, net/http says %q:%q (%v)", h, creds, user, pass, refOK)
		}
		if refOK && !ok && len(h) <= maxBasicAuth {
			t.Fatalf("%q: net/http reads %q:%q, we refuse it", h, user, pass)
		}
		_, err := v.Verify(Request{Header: http.Header{"Authorization": {h}}})
		checkErr(t, err, "u:p")
		// The verifier reads header values without the spaces around them,
		// as an HTTP server hands them over.
		creds, ok = parseBasicAuth(strings.TrimSpace(h))
		if (err == nil) != (ok && string(creds) == "u:p") {
			t.Fatalf("%q: accepted=%v", h, err == nil)
		}
	})
}

func FuzzMailgunSignature(f *testing.F) {
	good := `{"signature":{"timestamp":"` + fuzzTS() + `","token":"tok","signature":"` + hexMAC(hmacSecretA, []byte(fuzzTS()+"tok")) + `"},"event-data":{"id":"e1","event":"delivered"}}`
	for _, s := range []string{good, strings.Replace(good, `"tok"`, `"tok2"`, 1), `{"signature":{}}`, `{"signature":[]}`, `{"signature":{"timestamp":1700000000,"token":"t","signature":"00"}}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	v := mustNew(f, Config{Scheme: SchemeMailgun, Secrets: []string{hmacSecretB, hmacSecretA}})
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := v.Verify(Request{Header: http.Header{}, Body: body, Now: testNow})
		checkErr(t, err, hmacSecretA)
		// Reference: encoding/json's reading of the signature object.
		var doc struct {
			Signature *struct {
				Timestamp json.RawMessage `json:"timestamp"`
				Token     *string         `json:"token"`
				Signature *string         `json:"signature"`
				Parent    *string         `json:"parent-signature"`
			} `json:"signature"`
		}
		var s mailgunSigned
		perr := parseMailgunSignature(body, &s)
		if perr != nil {
			if errors.Is(err, ErrMalformed) || err == nil {
				t.Fatalf("%q: signature refused (%v), Verify says %v", body, perr, err)
			}
			return
		}
		if json.Unmarshal(body, &doc) != nil || doc.Signature == nil || doc.Signature.Token == nil || doc.Signature.Signature == nil {
			t.Fatalf("%q: parsed a signature encoding/json does not see", body)
		}
		if *doc.Signature.Token != s.token || asciiLower(*doc.Signature.Signature) != hex.EncodeToString(s.sigs[0][:]) {
			t.Fatalf("%q: parsed token %q sig %x; encoding/json says %q %q", body, s.token, s.sigs[0], *doc.Signature.Token, *doc.Signature.Signature)
		}
		if (doc.Signature.Parent != nil) != (s.n == 2) || s.n == 2 && asciiLower(*doc.Signature.Parent) != hex.EncodeToString(s.sigs[1][:]) {
			t.Fatalf("%q: parsed %d signatures (%x); encoding/json says parent-signature %v", body, s.n, s.sigs, doc.Signature.Parent)
		}
		tsText := strings.Trim(string(doc.Signature.Timestamp), `"`)
		if strconv.FormatInt(s.ts, 10) != strings.TrimLeft(tsText, "0") && !(s.ts == 0 && strings.Trim(tsText, "0") == "") {
			t.Fatalf("%q: parsed timestamp %d, encoding/json says %s", body, s.ts, doc.Signature.Timestamp)
		}
		if err == nil && (s.token != "tok" || s.ts != testNow.Unix()) {
			t.Fatalf("%q accepted (%+v) with a token or timestamp that was not signed", body, res)
		}
	})
}

func FuzzJSONPaths(f *testing.F) {
	for _, s := range []struct{ data, path string }{
		{`{"event":{"type":"app_mention"}}`, "event.type"}, {`{"a":{"b":{"c":1}}}`, "a.b.c"}, {`{"a":[{"b":1}]}`, "a.b"},
		{`{"a.b":1}`, "a.b"}, {`{"a":{"b":2},"a":{"c":3}}`, "a.b"}, {`{"a":null}`, "a.b"}, {`{}`, "."}, {`{"":{"":5}}`, "."},
	} {
		f.Add([]byte(s.data), s.path)
	}
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		got, _, ok := jsonPaths(data, path, "")
		var doc map[string]any
		refOK := decodeNumbers(data, &doc) == nil && doc != nil
		if ok != refOK {
			t.Fatalf("jsonPaths(%q) ok = %v, encoding/json %v", data, ok, refOK)
		}
		if !ok || path == "" {
			return
		}
		// Reference: walk encoding/json's maps.
		segs := strings.Split(path, ".")
		var cur any = doc
		for i, seg := range segs {
			m, isMap := cur.(map[string]any)
			if !isMap || i > maxPathDepth {
				cur = nil
				break
			}
			var present bool
			if cur, present = m[seg]; !present || seg == "" { // an empty name is never looked for
				cur = nil
				break
			}
		}
		if len(segs) > maxPathDepth+1 {
			return // beyond the depth jsonPaths looks to
		}
		if cur == nil {
			if got != nil && !bytes.Equal(got, []byte("null")) {
				t.Fatalf("jsonPaths(%q, %q) = %q, encoding/json finds nothing", data, path, got)
			}
			return
		}
		var val any
		if decodeNumbers(got, &val) != nil {
			t.Fatalf("jsonPaths(%q, %q) = %q, not a JSON value", data, path, got)
		}
		a, _ := json.Marshal(val)
		b, _ := json.Marshal(cur)
		if !bytes.Equal(a, b) {
			t.Fatalf("jsonPaths(%q, %q) = %s, encoding/json says %s", data, path, a, b)
		}
	})
}

func FuzzTwilioForm(f *testing.F) {
	for _, s := range []string{"MessageSid=SM1&To=%2B1555", "a=1&a=0&b=", "%zz=1", "", "=&=", "x=1;y=2"} {
		f.Add([]byte(s))
	}
	cfg := Config{Scheme: SchemeTwilio, Secrets: []string{hmacSecretA}, PublicURL: "https://h.example/x?q=1"}
	v := mustNew(f, cfg)
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := Sign(cfg, body, "", testNow)
		form, ferr := url.ParseQuery(string(body))
		if ferr != nil || bytes.Count(body, []byte("&")) >= maxTwilioParams {
			if err == nil {
				t.Fatalf("signed %q, which is not a form", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("Sign(%q): %v", body, err)
		}
		res, err := v.Verify(Request{Header: h, Body: body})
		if err != nil {
			t.Fatalf("round trip of %q: %v", body, err)
		}
		// The body re-encoded (names sorted, another escaping, a "&"
		// added) passes with the same signature: it has the same body key,
		// which is what the id is without an id header.
		key := BodyKey(v, body)
		if res.DeliveryID != hex.EncodeToString(key[:]) {
			t.Fatalf("%q: id %s, body key %x", body, res.DeliveryID, key)
		}
		alike := []byte(form.Encode())
		if bytes.Count(alike, []byte("&")) < maxTwilioParams-1 {
			alike = append(alike, '&')
		}
		if _, err := v.Verify(Request{Header: h, Body: alike}); err != nil {
			t.Fatalf("%q re-encoded as %q: %v", body, alike, err)
		}
		if got := BodyKey(v, alike); got != key {
			t.Fatalf("%q re-encoded as %q: key %x, want %x", body, alike, got, key)
		}
		// Reference: the documented recipe, for forms whose names have one
		// value each (as twilio-go reads them).
		single := true
		for _, vs := range form {
			single = single && len(vs) == 1
		}
		if single {
			var names []string
			for k := range form {
				names = append(names, k)
			}
			slices.Sort(names)
			s := cfg.PublicURL
			for _, k := range names {
				s += k + form.Get(k)
			}
			want := base64.StdEncoding.EncodeToString(macSHA1(hmacSecretA, s))
			if got := h.Get("X-Twilio-Signature"); got != want {
				t.Fatalf("%q: signature %q, recipe %q", body, got, want)
			}
		}
	})
}

func FuzzKeys(f *testing.F) {
	for _, s := range []string{hex.EncodeToString(v1aPrivA.Public().(ed25519.PublicKey)), base64.StdEncoding.EncodeToString(v1aPrivA.Public().(ed25519.PublicKey)),
		"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE", "", "zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		quotes := func(err error) bool { return err != nil && len(key) > 6 && strings.Contains(err.Error(), key) }
		pub, err1 := parseEd25519Public(key)
		ecPub, err2 := parseECDSAPublic(key)
		// The private keys hookbox send signs with.
		priv, err3 := parseEd25519Private(key)
		ecPriv, err4 := parseECDSAPrivate(key)
		for _, err := range []error{err1, err2, err3, err4} {
			if quotes(err) {
				t.Fatalf("error %q quotes the key", err)
			}
		}
		switch {
		case err1 == nil && len(pub) != ed25519.PublicKeySize:
			t.Fatalf("ed25519 public key of %d bytes", len(pub))
		case err2 == nil && ecPub.Curve.Params().Name != "P-256":
			t.Fatalf("curve %s", ecPub.Curve.Params().Name)
		case err3 == nil && len(priv) != ed25519.PrivateKeySize:
			t.Fatalf("ed25519 private key of %d bytes", len(priv))
		case err4 == nil && ecPriv.Curve.Params().Name != "P-256":
			t.Fatalf("curve %s", ecPriv.Curve.Params().Name)
		}
	})
}

// FuzzHandshake feeds arbitrary bodies, validly signed, to the three
// handshakes: a reply comes only for the handshake's own request, is valid
// JSON (or empty, 204), and echoes nothing but a bounded printable token.
func FuzzHandshake(f *testing.F) {
	for _, s := range []string{
		`{"type":"url_verification","challenge":"abc"}`, `{"type":"url_verification","challenge":"a\"b"}`, `{"type":"url_verification"}`,
		`{"event":"endpoint.url_validation","payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"}}`, `{"event":"endpoint.url_validation","payload":"x"}`,
		`{"type":1}`, `{"type":0}`, `{"type":1,"event":{}}`, `{"type":"1"}`, `[]`, ``,
	} {
		f.Add([]byte(s), uint8(0))
	}
	base := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", TimestampHeader: "X-Ts", Signed: "{timestamp}{body}"}
	var vs [3]Verifier
	for i, kind := range []string{HandshakeSlack, HandshakeZoom, HandshakeDiscord} {
		cfg := base
		cfg.Handshake = kind
		vs[i] = mustNew(f, cfg)
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		i := int(which) % len(vs)
		h, err := Sign(base, body, "", testNow)
		if err != nil {
			t.Fatal(err)
		}
		res, err := vs[i].Verify(Request{Header: h, Body: body, Now: testNow})
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("signed body %q: %v", body, err)
		}
		if res.Reply == nil {
			return
		}
		var doc map[string]any
		if json.Unmarshal(body, &doc) != nil {
			t.Fatalf("reply to %q, which is not a JSON object", body)
		}
		r := res.Reply
		if r.Status == http.StatusNoContent {
			if len(r.Body) != 0 || i != 2 {
				t.Fatalf("204 with %q from handshake %d", r.Body, i)
			}
			return
		}
		var reply map[string]any
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &reply) != nil {
			t.Fatalf("reply %d %q", r.Status, r.Body)
		}
		for k, v := range reply {
			if s, ok := v.(string); ok && k != "encryptedToken" && !printableToken(s) {
				t.Fatalf("reply echoes %q", s)
			}
		}
		switch i {
		case 0:
			if doc["type"] != "url_verification" {
				t.Fatalf("slack reply to %q", body)
			}
		case 1:
			if doc["event"] != "endpoint.url_validation" {
				t.Fatalf("zoom reply to %q", body)
			}
		case 2:
			if _, hasEvent := doc["event"]; hasEvent {
				t.Fatalf("discord reply to an event: %q", body)
			}
		}
	})
}

// decodeNumbers is json.Unmarshal keeping numbers as text, so that a
// number too large for a float64 is still valid JSON, as it is to the
// scanner.
func decodeNumbers(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}
