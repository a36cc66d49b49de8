package verify

import (
	"crypto/ed25519"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The schemes and handshakes that no preset covers alone are tested here;
// config/provider_test.go checks every provider preset against signatures
// made by the provider's library or documented recipe.

// ed25519 keys for the v1a tests, from fixed seeds.
var (
	v1aPrivA = ed25519.NewKeyFromSeed(sha256Sum("v1a seed A"))
	v1aPrivB = ed25519.NewKeyFromSeed(sha256Sum("v1a seed B"))
	whpkA    = "whpk_" + base64.StdEncoding.EncodeToString(v1aPrivA.Public().(ed25519.PublicKey))
	whpkB    = "whpk_" + base64.StdEncoding.EncodeToString(v1aPrivB.Public().(ed25519.PublicKey))
	whskA    = "whsk_" + base64.StdEncoding.EncodeToString(v1aPrivA.Seed())
)

func sha256Sum(s string) []byte { b := sha256.Sum256([]byte(s)); return b[:] }

// v1aSig signs as the Standard Webhooks spec says for v1a: ed25519 over
// "{id}.{timestamp}.{body}", base64, after "v1a,".
func v1aSig(priv ed25519.PrivateKey, id string, ts time.Time, body []byte) string {
	msg := id + "." + strconv.FormatInt(ts.Unix(), 10) + "." + string(body)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg)))
}

func TestStandardWebhooksV1a(t *testing.T) {
	const id = "msg_v1a"
	body := eventBody
	sigA := v1aSig(v1aPrivA, id, testNow, body)
	sigB := v1aSig(v1aPrivB, id, testNow, body)
	hmacSig := libSW(t, swSecretA, false, id, testNow, body)
	def := Config{Scheme: SchemeStandardWebhooks, Secrets: []string{whpkA}}
	ok := Result{DeliveryID: id, EventType: "invoice.paid"}
	cases := []verifyCase{
		{name: "valid", header: swHdr(id, testNow, sigA), body: body, want: ok},
		{name: "beside a v1 signature", header: swHdr(id, testNow, hmacSig+" "+sigA), body: body, want: ok},
		{name: "v1 alone, no HMAC secret", header: swHdr(id, testNow, hmacSig), body: body, wantErr: ErrUnauthorized, errText: "no valid v1a signature"},
		{name: "mixed secrets, v1 signs", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{whpkB, swSecretA}}, header: swHdr(id, testNow, hmacSig), body: body, want: ok},
		{name: "mixed secrets, v1a signs", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA, whpkA}}, header: swHdr(id, testNow, sigA), body: body, want: ok},
		{name: "mixed secrets, neither", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretB, whpkB}}, header: swHdr(id, testNow, hmacSig+" "+sigA), body: body,
			wantErr: ErrUnauthorized, errText: "no v1 or v1a signature matches"},
		{name: "rotated keys", cfg: Config{Scheme: SchemeStandardWebhooks, Secrets: []string{whpkB, whpkA}}, header: swHdr(id, testNow, sigA), body: body, want: ok},
		{name: "several signatures", header: swHdr(id, testNow, sigB+" "+sigA), body: body, want: ok},
		// Each v1a entry costs a pass over the body per key: past three,
		// entries are ignored, even the one that would verify.
		{name: "third of three", header: swHdr(id, testNow, sigB+" "+sigB+" "+sigA), body: body, want: ok},
		{name: "fourth v1a entry ignored", header: swHdr(id, testNow, sigB+" "+sigB+" "+sigB+" "+sigA), body: body,
			wantErr: ErrUnauthorized, errText: "no v1a signature matches"},
		{name: "wrong key", header: swHdr(id, testNow, sigB), body: body, wantErr: ErrUnauthorized, errText: "no v1a signature matches"},
		{name: "tampered body", header: swHdr(id, testNow, sigA), body: []byte(strings.Replace(string(body), "paid", "void", 1)), wantErr: ErrUnauthorized},
		{name: "tampered id", header: swHdr("msg_other", testNow, sigA), body: body, wantErr: ErrUnauthorized},
		{name: "stale", header: swHdr(id, testNow.Add(-6*time.Minute), v1aSig(v1aPrivA, id, testNow.Add(-6*time.Minute), body)), body: body,
			wantErr: ErrUnauthorized, errText: "outside tolerance"},
		{name: "future", header: swHdr(id, testNow.Add(6*time.Minute), v1aSig(v1aPrivA, id, testNow.Add(6*time.Minute), body)), body: body,
			wantErr: ErrUnauthorized, errText: "outside tolerance"},
		{name: "missing signature header", header: hdr("webhook-id", id, "webhook-timestamp", strconv.FormatInt(testNow.Unix(), 10)), body: body,
			wantErr: ErrUnauthorized, errText: "missing webhook-signature"},
		{name: "truncated signature", header: swHdr(id, testNow, sigA[:len(sigA)-4]), body: body, wantErr: ErrUnauthorized, errText: "no valid v1a signature"},
		{name: "v1a without padding", header: swHdr(id, testNow, strings.TrimRight(sigA, "=")), body: body, wantErr: ErrUnauthorized},
	}
	runCases(t, def, cases)

	h, err := Sign(Config{Scheme: SchemeStandardWebhooks, Secrets: []string{whpkA}, SigningKey: whskA}, body, id, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != sigA {
		t.Fatalf("Sign = %q, want the spec's %q", got, sigA)
	}
	if _, err := Sign(def, body, id, testNow); err == nil || !strings.Contains(err.Error(), "cannot sign") {
		t.Fatalf("Sign with a public key only: %v", err)
	}
}

func basicHdr(creds string) http.Header {
	return hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(creds)))
}

func TestTokenAndBasic(t *testing.T) {
	body := []byte(`{"object_kind":"push"}`)
	tok := Config{Scheme: SchemeToken, Secrets: []string{"tok-A-123"}, Header: "X-Gitlab-Token", IDHeader: "Idempotency-Key"}
	runCases(t, tok, []verifyCase{
		{name: "token", header: hdr("X-Gitlab-Token", "tok-A-123", "Idempotency-Key", "k1"), body: body, want: Result{DeliveryID: "k1"}},
		{name: "token rotated", cfg: Config{Scheme: SchemeToken, Secrets: []string{"tok-B", "tok-A-123"}, Header: "X-Gitlab-Token"}, header: hdr("X-Gitlab-Token", "tok-A-123"), body: body,
			want: Result{DeliveryID: bodyHash(body), IDIsHash: true}},
		{name: "token wrong", header: hdr("X-Gitlab-Token", "tok-A-12", "Idempotency-Key", "k1"), body: body, wantErr: ErrUnauthorized, errText: "does not match"},
		{name: "token longer", header: hdr("X-Gitlab-Token", "tok-A-1234", "Idempotency-Key", "k1"), body: body, wantErr: ErrUnauthorized},
		{name: "token missing", header: hdr("Idempotency-Key", "k1"), body: body, wantErr: ErrUnauthorized, errText: "missing X-Gitlab-Token"},
		{name: "token without id", header: hdr("X-Gitlab-Token", "tok-A-123"), body: body, wantErr: ErrMalformed},
	})
	basic := Config{Scheme: SchemeBasic, Secrets: []string{"hook:pa55:word"}}
	okHash := Result{DeliveryID: bodyHash(body), IDIsHash: true}
	runCases(t, basic, []verifyCase{
		{name: "basic", header: basicHdr("hook:pa55:word"), body: body, want: okHash},
		{name: "basic lower-case scheme", header: hdr("Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("hook:pa55:word"))), body: body, want: okHash},
		{name: "basic rotated", cfg: Config{Scheme: SchemeBasic, Secrets: []string{"hook:new", "hook:pa55:word"}}, header: basicHdr("hook:pa55:word"), body: body, want: okHash},
		{name: "basic wrong password", header: basicHdr("hook:pa55"), body: body, wantErr: ErrUnauthorized, errText: "credentials do not match"},
		{name: "basic wrong user", header: basicHdr("hoo:pa55:word"), body: body, wantErr: ErrUnauthorized},
		{name: "basic missing", header: hdr(), body: body, wantErr: ErrUnauthorized, errText: "missing Authorization"},
		{name: "basic bearer", header: hdr("Authorization", "Bearer hook:pa55:word"), body: body, wantErr: ErrUnauthorized, errText: "not Basic"},
		{name: "basic not base64", header: hdr("Authorization", "Basic %%%"), body: body, wantErr: ErrUnauthorized, errText: "not Basic"},
		{name: "basic without colon", header: basicHdr("hookpa55word"), body: body, wantErr: ErrUnauthorized},
	})
	// Both are judged from the headers: a wrong token is refused before
	// the body is read.
	v := mustNew(t, tok)
	if err := v.CheckHeader(Request{Header: hdr("X-Gitlab-Token", "nope")}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("CheckHeader(wrong token) = %v", err)
	}
	for _, cfg := range []Config{tok, basic} {
		h, err := Sign(cfg, body, "k9", testNow)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mustNew(t, cfg).Verify(Request{Header: h, Body: body, Now: testNow}); err != nil {
			t.Fatalf("%s round trip: %v", cfg.Scheme, err)
		}
	}
}

func TestHandshakes(t *testing.T) {
	const secret = "handshake-secret-77"
	slack := Config{Scheme: SchemeHMAC, Secrets: []string{"old-secret-0", secret}, Header: "X-Slack-Signature", Prefix: "v0=",
		TimestampHeader: "X-Slack-Request-Timestamp", Signed: "v0:{timestamp}:{body}", IDField: "event_id", Handshake: HandshakeSlack}
	zoom := slack
	zoom.Header, zoom.TimestampHeader, zoom.IDField, zoom.Handshake = "x-zm-signature", "x-zm-request-timestamp", "", HandshakeZoom
	v0 := func(cfg Config, body string) http.Header {
		mac := hexMAC(secret, []byte("v0:"+strconv.FormatInt(testNow.Unix(), 10)+":"+body))
		return hdr(cfg.Header, "v0="+mac, cfg.TimestampHeader, strconv.FormatInt(testNow.Unix(), 10))
	}
	verifyBody := func(cfg Config, h http.Header, body string) (Result, error) {
		return mustNew(t, cfg).Verify(Request{Header: h, Body: []byte(body), Now: testNow})
	}

	challenge := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	res, err := verifyBody(slack, v0(slack, challenge), challenge)
	if err != nil || res.Reply == nil || res.Reply.Status != 200 || string(res.Reply.Body) != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` {
		t.Fatalf("slack url_verification = %+v, %v", res, err)
	}
	if _, err := verifyBody(slack, v0(slack, challenge), strings.Replace(challenge, "3eZ", "4eZ", 1)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unsigned slack handshake: %v", err)
	}
	bad := `{"type":"url_verification","challenge":"<script>"}`
	if _, err := verifyBody(slack, v0(slack, bad), bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("slack challenge with markup: %v", err)
	}
	event := `{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`
	if res, err := verifyBody(slack, v0(slack, event), event); err != nil || res.Reply != nil || res.DeliveryID != "Ev1" {
		t.Fatalf("slack event = %+v, %v", res, err)
	}

	validation := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	res, err = verifyBody(zoom, v0(zoom, validation), validation)
	want := `{"encryptedToken":"` + hexMAC(secret, []byte("qgg8vlvZRS6UYooatFL8Aw")) + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`
	if err != nil || res.Reply == nil || string(res.Reply.Body) != want {
		t.Fatalf("zoom url_validation = %+v (%s), %v; want %s", res, res.Reply.Body, err, want)
	}
	// Unsigned, the reply would hand out an HMAC under the secret of a
	// text the caller chose: refused.
	forged := hdr("x-zm-signature", "v0="+strings.Repeat("0", 64), "x-zm-request-timestamp", strconv.FormatInt(testNow.Unix(), 10))
	if res, err := verifyBody(zoom, forged, validation); !errors.Is(err, ErrUnauthorized) || res.Reply != nil {
		t.Fatalf("unsigned zoom handshake = %+v, %v", res, err)
	}

	pub := hex.EncodeToString(v1aPrivA.Public().(ed25519.PublicKey))
	discord := Config{Scheme: SchemeHMAC, Algorithm: AlgorithmEd25519, Secrets: []string{pub}, Header: "X-Signature-Ed25519",
		TimestampHeader: "X-Signature-Timestamp", Signed: "{timestamp}{body}", Handshake: HandshakeDiscord}
	ed := func(body string) http.Header {
		tsText := strconv.FormatInt(testNow.Unix(), 10)
		return hdr("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(v1aPrivA, []byte(tsText+body))), "X-Signature-Timestamp", tsText)
	}
	for _, c := range []struct {
		body       string
		status     int
		replyBody  string
		wantHandsh bool
	}{
		{`{"id":"1","application_id":"2","type":1,"token":"t"}`, 200, `{"type":1}`, true},
		{`{"version":1,"application_id":"2","type":0}`, 204, ``, true},
		{`{"version":1,"application_id":"2","type":1,"event":{"type":"ENTITLEMENT_CREATE"}}`, 0, ``, false},
	} {
		res, err := verifyBody(discord, ed(c.body), c.body)
		if err != nil || (res.Reply != nil) != c.wantHandsh {
			t.Fatalf("discord %s = %+v, %v", c.body, res, err)
		}
		if c.wantHandsh && (res.Reply.Status != c.status || string(res.Reply.Body) != c.replyBody) {
			t.Fatalf("discord %s reply = %d %q", c.body, res.Reply.Status, res.Reply.Body)
		}
	}
	ping := `{"type":1}`
	if _, err := verifyBody(discord, ed(ping), `{"type":1} `); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unsigned discord PING: %v", err)
	}
}

func TestSignedTemplate(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"", ""}, {"{body}", ""}, {"v0:{timestamp}:{body}", ""}, {"{url}{body}", ""}, {"{timestamp}.{url}.{body}", ""},
		{"{timestamp}", "must end with {body}"}, {"{body}{body}", "once, at the end"}, {"{ts}{body}", "unknown placeholder"},
		{"a}{body}", "unknown placeholder"}, {strings.Repeat("a", 300) + "{body}", "longer than"},
	} {
		_, err := parseSignedTemplate(c.in)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseSignedTemplate(%q) = %v, want %q", c.in, err, c.err)
		}
	}
	parts, _ := parseSignedTemplate("v0:{timestamp}:{url}|{body}")
	if got := string(appendTemplate(nil, parts, 42, "https://x/y")); got != "v0:42:https://x/y|" {
		t.Fatalf("appendTemplate = %q", got)
	}
}

// TestNewSchemesNeverLeak provokes failures of the new schemes and checks
// that no error text carries a secret or the expected signature.
func TestNewSchemesNeverLeak(t *testing.T) {
	const secret = "LEAKY-SECRET-0xdeadbeef"
	body := []byte(`{"id":"x","event_id":"y","type":"z","signature":{"timestamp":"1700000000","token":"tok","signature":"00"}}`)
	cfgs := []Config{
		{Scheme: SchemePaddle, Secrets: []string{secret}},
		{Scheme: SchemeHMAC, Secrets: []string{secret}, Header: "X-Sig", Prefix: "v0=", TimestampHeader: "X-Ts", Signed: "v0:{timestamp}:{body}"},
		{Scheme: SchemeHMAC, Secrets: []string{secret}, Header: "X-Sig", Signed: "{url}{body}", PublicURL: "https://h/x", Handshake: HandshakeZoom},
		{Scheme: SchemeTwilio, Secrets: []string{secret}, PublicURL: "https://h/x"},
		{Scheme: SchemeMailgun, Secrets: []string{secret}},
		{Scheme: SchemeToken, Secrets: []string{secret}, Header: "X-Token"},
		{Scheme: SchemeBasic, Secrets: []string{"user:" + secret}},
	}
	for _, cfg := range cfgs {
		good, signed, err := SignRequest(cfg, body, "id1", testNow)
		if err != nil {
			t.Fatalf("%s: %v", cfg.Scheme, err)
		}
		var forbidden []string
		for _, vs := range good {
			for _, v := range vs {
				forbidden = append(forbidden, strings.TrimPrefix(strings.TrimPrefix(v, "v0="), "Basic "))
			}
		}
		v := mustNew(t, cfg)
		for _, r := range []Request{
			{Header: good, Body: append(signed, ' '), Now: testNow},
			{Header: good, Body: signed, Now: testNow.Add(time.Hour)},
			{Header: http.Header{}, Body: body, Now: testNow},
			{Header: hdr("X-Sig", "v0=zz", "X-Token", "nope", "Authorization", "Basic dXNlcjpubw==", "X-Ts", "1", "Paddle-Signature", "ts=1;h1=00"), Body: body, Now: testNow},
		} {
			_, err := v.Verify(r)
			if err == nil {
				continue
			}
			for _, f := range append(forbidden, secret) {
				if len(f) > 6 && strings.Contains(err.Error(), f) {
					t.Fatalf("%s: error %q leaks %q", cfg.Scheme, err, f)
				}
			}
		}
	}
}

func TestTwilioBounds(t *testing.T) {
	cfg := Config{Scheme: SchemeTwilio, Secrets: []string{"tok"}, PublicURL: "https://h/x"}
	body := []byte(strings.Repeat("a=1&", maxTwilioParams))
	h := hdr("X-Twilio-Signature", base64.StdEncoding.EncodeToString(make([]byte, 20)))
	if _, err := mustNew(t, cfg).Verify(Request{Header: h, Body: body}); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "form") {
		t.Fatalf("too many parameters: %v", err)
	}
	if got := togglePort("https://h:443/x?a=1"); got != "https://h/x?a=1" {
		t.Fatalf("togglePort = %q", got)
	}
	if got := togglePort("http://[::1]/x"); got != "http://[::1]:80/x" {
		t.Fatalf("togglePort = %q", got)
	}
	if got := togglePort("https://h:8443/x"); got != "" {
		t.Fatalf("togglePort = %q", got)
	}
}

func macSHA1(key, msg string) []byte { return macWith(sha1.New, key, []byte(msg)) }

func TestBodyFields(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		id, typ string
	}{
		{Config{Scheme: SchemeStripe}, "id", "type"},
		{Config{Scheme: SchemeStandardWebhooks}, "", "type"},
		{Config{Scheme: SchemeStandardWebhooks, TypeHeader: "X-Gitlab-Event"}, "", ""},
		{Config{Scheme: SchemeGitHub}, "", ""},
		{Config{Scheme: SchemePaddle}, "event_id", "event_type"},
		{Config{Scheme: SchemePaddle, IDHeader: "X-Id"}, "", "event_type"},
		{Config{Scheme: SchemeMailgun}, "event-data.id", "event-data.event"},
		{Config{Scheme: SchemeHMAC, IDField: "event_id", TypeField: "event.type"}, "event_id", "event.type"},
		{Config{Scheme: SchemeNone}, "", ""},
	} {
		if id, typ := BodyFields(c.cfg); id != c.id || typ != c.typ {
			t.Errorf("BodyFields(%+v) = %q, %q; want %q, %q", c.cfg, id, typ, c.id, c.typ)
		}
	}
}

// TestTokenHeaderNotIDNorType: an id_header or type_header that names the
// header carrying a token source's secret itself (or basic's
// Authorization) is refused: the token was stored, listed and logged as
// each delivery's id, and `hookbox send` printed it (found by a helper's
// review, session 44).
func TestTokenHeaderNotIDNorType(t *testing.T) {
	for _, c := range []Config{
		{Scheme: SchemeToken, Header: "X-Gitlab-Token", Secrets: []string{"tok-0123456789"}, IDHeader: "x-gitlab-token"},
		{Scheme: SchemeToken, Header: "X-Gitlab-Token", Secrets: []string{"tok-0123456789"}, TypeHeader: "X-Gitlab-Token"},
		{Scheme: SchemeBasic, Secrets: []string{"user:pass"}, IDHeader: "Authorization"},
	} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "carries the "+string(c.Scheme)+"'s secret itself") {
			t.Errorf("%s with id_header %q, type_header %q: %v, want it refused", c.Scheme, c.IDHeader, c.TypeHeader, err)
		}
	}
	if _, err := New(Config{Scheme: SchemeToken, Header: "X-Gitlab-Token", Secrets: []string{"tok-0123456789"}, IDHeader: "Idempotency-Key"}); err != nil {
		t.Errorf("another id_header: %v", err)
	}
}
