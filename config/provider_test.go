package config

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookbox/hookbox/verify"
)

// The preset tests sign every delivery independently of package verify:
// with the provider's own Go library where one exists (stripe-go, the
// Standard Webhooks library), else by hand from the provider's documented
// recipe, and check each preset's verifier against it. Library-made
// vectors from slack-go and twilio-go, and GitHub's documented vector,
// are checked in TestPresetVectors.

var presetNow = time.Unix(1_700_000_000, 0)

// signedDelivery is one request as a provider sends it.
type signedDelivery struct {
	h    http.Header
	body []byte
}

// providerCase drives the checks every preset must pass.
type providerCase struct {
	provider string
	scheme   string    // set to pick a preset's alternative scheme
	secrets  [2]string // A and B, both valid keys (public keys for ed25519/ECDSA)
	extra    func(*Source)
	body     []byte
	id       string // what the provider puts in its id header, if any
	// sign makes the delivery with key 0 (A) or 1 (B) at now.
	sign func(t *testing.T, key int, body []byte, id string, now time.Time) signedDelivery
	want verify.Result
	// timestamped: a signed timestamp, so stale and future deliveries fail.
	timestamped bool
	// strip removes the signature in each of its parts (headers, or body
	// fields), each a delivery that must be refused.
	strip []func(signedDelivery) signedDelivery
	// tamper changes what the signature covers; nil for schemes that
	// cover no body (token), where wrong-key covers the check.
	tamper func(signedDelivery) signedDelivery
}

func macOf(h func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func hdrs(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func dropHeader(name string) func(signedDelivery) signedDelivery {
	return func(d signedDelivery) signedDelivery {
		h := d.h.Clone()
		h.Del(name)
		return signedDelivery{h, d.body}
	}
}

func flipBody(d signedDelivery) signedDelivery {
	b := slices.Clone(d.body)
	i := len(b) / 2
	if b[i] == 'x' {
		b[i] = 'y'
	} else {
		b[i] = 'x'
	}
	return signedDelivery{d.h, b}
}

func ts(now time.Time) string { return strconv.FormatInt(now.Unix(), 10) }

func bodyHashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// swSign signs with the Standard Webhooks library, under the header family
// prefix ("webhook" or "svix").
func swSign(t *testing.T, secret, family string, body []byte, id string, now time.Time) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	return hdrs(family+"-id", id, family+"-timestamp", ts(now), family+"-signature", sig)
}

// swSecrets are two whsec_ secrets for the Standard Webhooks presets.
func swSecrets() [2]string {
	return [2]string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("preset-sw-key-A-0123456789abcdef")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("preset-sw-key-B-0123456789abcdef")),
	}
}

// swCase is the case of a preset that signs with Standard Webhooks under
// the header family ("webhook" or "svix").
func swCase(provider, family string) providerCase {
	body := []byte(`{"type":"order.paid","data":{"id":"ord_1"}}`)
	return providerCase{
		provider: provider, secrets: swSecrets(), body: body, id: "msg_2Lh9",
		sign: func(t *testing.T, key int, body []byte, id string, now time.Time) signedDelivery {
			return signedDelivery{swSign(t, swSecrets()[key], family, body, id, now), body}
		},
		want:        verify.Result{DeliveryID: "msg_2Lh9", EventType: "order.paid"},
		timestamped: true,
		strip:       []func(signedDelivery) signedDelivery{dropHeader(family + "-signature"), dropHeader(family + "-timestamp"), dropHeader(family + "-id")},
		tamper:      flipBody,
	}
}

// Key pairs for the public-key presets, made once.
var (
	discordKeys [2]ed25519.PrivateKey
	sendgridKey [2]*ecdsa.PrivateKey
)

func init() {
	for i := range discordKeys {
		seed := sha256.Sum256([]byte("discord test seed " + strconv.Itoa(i)))
		discordKeys[i] = ed25519.NewKeyFromSeed(seed[:])
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		sendgridKey[i] = k
	}
}

func sendgridPublic(i int) string {
	der, err := x509.MarshalPKIXPublicKey(&sendgridKey[i].PublicKey)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// mailgunBody puts a Mailgun signature object in front of event data.
func mailgunBody(key, token string, now time.Time, eventData string) []byte {
	sig := hex.EncodeToString(macOf(sha256.New, key, ts(now), token))
	return []byte(fmt.Sprintf(`{"signature":{"timestamp":"%s","token":"%s","signature":"%s"},"event-data":%s}`, ts(now), token, sig, eventData))
}

// twilioSig is Twilio's documented recipe: base64 HMAC-SHA1 of the URL and
// the sorted parameters, each name then value.
func twilioSig(token, u string, form url.Values) string {
	return base64.StdEncoding.EncodeToString(macOf(sha1.New, token, u+twilioParams(form)))
}

// twilioParams is the sorted parameters, each name then value, as Twilio
// signs them after the URL.
func twilioParams(form url.Values) string {
	var names []string
	for k := range form {
		names = append(names, k)
	}
	slices.Sort(names)
	var s string
	for _, k := range names {
		s += k + form.Get(k)
	}
	return s
}

const (
	twilioURL = "https://hooks.example.com/webhooks/twilio?acct=7"
	squareURL = "https://hooks.example.com/webhooks/square"
)

func providerCases() []providerCase {
	stripeBody := []byte(`{"id":"evt_1PZ","object":"event","type":"invoice.paid"}`)
	twilioForm := url.Values{"MessageSid": {"SM1f0e"}, "MessageStatus": {"delivered"}, "To": {"+15551234567"}, "AccountSid": {"AC9"}}
	twilioBody := []byte(twilioForm.Encode())
	sendgridBody := []byte("[{\"sg_event_id\":\"e1\",\"event\":\"delivered\"},\r\n{\"sg_event_id\":\"e2\",\"event\":\"open\"}]")
	discordBody := []byte(`{"version":1,"application_id":"123","type":1,"event":{"type":"APPLICATION_AUTHORIZED","data":{}}}`)
	zoomBody := []byte(`{"event":"meeting.started","event_ts":1700000000000,"payload":{"object":{"id":"9"}}}`)
	mailgunEvent := `{"id":"mgEv-42","event":"delivered","recipient":"a@example.com"}`
	cases := []providerCase{
		{
			provider: "stripe", secrets: [2]string{"whsec_presetStripeA_0123456789", "whsec_presetStripeB_0123456789"},
			body: stripeBody,
			want: verify.Result{DeliveryID: "evt_1PZ", EventType: "invoice.paid"}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("Stripe-Signature")},
			tamper: flipBody,
		},
		{
			provider: "github", secrets: [2]string{"gh-preset-secret-A", "gh-preset-secret-B"},
			body: []byte(`{"action":"opened","number":7}`), id: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			want:   verify.Result{DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", EventType: "issues"},
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Hub-Signature-256")},
			tamper: flipBody,
		},
		{
			provider: "gitlab", secrets: [2]string{"gitlab-token-A-9f2", "gitlab-token-B-0c7"},
			body: []byte(`{"object_kind":"push"}`), id: "f7b7c1a2-idem",
			want:  verify.Result{DeliveryID: "f7b7c1a2-idem", EventType: "Push Hook"},
			strip: []func(signedDelivery) signedDelivery{dropHeader("X-Gitlab-Token")},
		},
		{
			provider: "gitlab", scheme: verify.SchemeStandardWebhooks, secrets: swSecrets(),
			body: []byte(`{"object_kind":"push"}`), id: "msg_gitlab_1",
			want: verify.Result{DeliveryID: "msg_gitlab_1", EventType: "Push Hook"}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("webhook-signature")},
			tamper: flipBody,
		},
		{
			provider: "shopify", secrets: [2]string{"shpss_presetA", "shpss_presetB"},
			body: []byte(`{"id":820982911946154508,"email":"jon@example.com"}`), id: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
			want:   verify.Result{DeliveryID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", EventType: "orders/create"},
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Shopify-Hmac-Sha256")},
			tamper: flipBody,
		},
		{
			provider: "slack", secrets: [2]string{"8f742231b10e8888abcd99yyyzzz85a5", "0e8888abcd99yyyzzz85a58f742231b1"},
			body: []byte(`{"token":"z","type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}`),
			want: verify.Result{DeliveryID: "Ev08MFMKH6", EventType: "app_mention"}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Slack-Signature"), dropHeader("X-Slack-Request-Timestamp")},
			tamper: flipBody,
		},
		{
			provider: "twilio", secrets: [2]string{"twilio-auth-token-A", "twilio-auth-token-B"},
			extra: func(s *Source) { s.PublicURL = twilioURL },
			body:  twilioBody,
			want:  verify.Result{DeliveryID: bodyHashOf([]byte(twilioParams(twilioForm))), IDIsHash: true}, // what Twilio signed
			strip: []func(signedDelivery) signedDelivery{dropHeader("X-Twilio-Signature")}, tamper: flipBody,
		},
		{
			provider: "paddle", secrets: [2]string{"pdl_ntfset_01presetA_secret", "pdl_ntfset_01presetB_secret"},
			body: []byte(`{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed","data":{}}`),
			want: verify.Result{DeliveryID: "evt_01h8bzakzx3hm2fmen703n5q45", EventType: "transaction.completed"}, timestamped: true,
			strip: []func(signedDelivery) signedDelivery{dropHeader("Paddle-Signature")}, tamper: flipBody,
		},
		{
			provider: "linear", secrets: [2]string{"lin_wh_presetA", "lin_wh_presetB"},
			body: []byte(`{"action":"create","type":"Issue","webhookTimestamp":1700000000000}`), id: "2d3b1f0e-linear",
			want:  verify.Result{DeliveryID: "2d3b1f0e-linear", EventType: "Issue"},
			strip: []func(signedDelivery) signedDelivery{dropHeader("Linear-Signature")}, tamper: flipBody,
		},
		{
			provider: "discord",
			secrets:  [2]string{hex.EncodeToString(discordKeys[0].Public().(ed25519.PublicKey)), hex.EncodeToString(discordKeys[1].Public().(ed25519.PublicKey))},
			body:     discordBody,
			want:     verify.Result{DeliveryID: bodyHashOf(discordBody), IDIsHash: true, EventType: "APPLICATION_AUTHORIZED"}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Signature-Ed25519"), dropHeader("X-Signature-Timestamp")},
			tamper: flipBody,
		},
		{
			provider: "mailgun", secrets: [2]string{"key-mailgun-signing-A", "key-mailgun-signing-B"},
			body: []byte(mailgunEvent),
			want: verify.Result{DeliveryID: "mgEv-42", EventType: "delivered"}, timestamped: true,
			strip: []func(signedDelivery) signedDelivery{func(d signedDelivery) signedDelivery {
				return signedDelivery{d.h, []byte(`{"event-data":` + mailgunEvent + `}`)}
			}},
			// The signature covers timestamp and token, not event-data.
			tamper: func(d signedDelivery) signedDelivery {
				return signedDelivery{d.h, []byte(strings.Replace(string(d.body), `"token":"`, `"token":"x`, 1))}
			},
		},
		{
			provider: "sendgrid", secrets: [2]string{sendgridPublic(0), sendgridPublic(1)},
			body: sendgridBody,
			want: verify.Result{DeliveryID: bodyHashOf(sendgridBody), IDIsHash: true}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Twilio-Email-Event-Webhook-Signature"), dropHeader("X-Twilio-Email-Event-Webhook-Timestamp")},
			tamper: flipBody,
		},
		swCase("polar", "webhook"),
		swCase("svix", "svix"),
		swCase("clerk", "svix"),
		swCase("resend", "svix"),
		{
			provider: "zoom", secrets: [2]string{"zoom-secret-token-A", "zoom-secret-token-B"},
			body: zoomBody,
			want: verify.Result{DeliveryID: bodyHashOf(zoomBody), IDIsHash: true, EventType: "meeting.started"}, timestamped: true,
			strip:  []func(signedDelivery) signedDelivery{dropHeader("X-Zm-Signature"), dropHeader("X-Zm-Request-Timestamp")},
			tamper: flipBody,
		},
		{
			provider: "square", secrets: [2]string{"sq0wss-signature-key-A", "sq0wss-signature-key-B"},
			extra: func(s *Source) { s.PublicURL = squareURL },
			body:  []byte(`{"merchant_id":"M1","type":"payment.updated","event_id":"6a8f5f28-5b6e-4a83","data":{}}`),
			want:  verify.Result{DeliveryID: "6a8f5f28-5b6e-4a83", EventType: "payment.updated"},
			strip: []func(signedDelivery) signedDelivery{dropHeader("X-Square-Hmacsha256-Signature")}, tamper: flipBody,
		},
	}
	for i := range cases {
		c := &cases[i]
		if c.sign != nil {
			continue
		}
		c.sign = providerSigner(c)
	}
	return cases
}

// providerSigner signs as the provider does, from its documentation (or
// its library).
func providerSigner(c *providerCase) func(t *testing.T, key int, body []byte, id string, now time.Time) signedDelivery {
	secrets := c.secrets
	return func(t *testing.T, key int, body []byte, id string, now time.Time) signedDelivery {
		k := secrets[key]
		switch c.provider {
		case "stripe":
			h := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: k, Timestamp: now}).Header
			return signedDelivery{hdrs("Stripe-Signature", h), body}
		case "github":
			return signedDelivery{hdrs("X-Hub-Signature-256", "sha256="+hex.EncodeToString(macOf(sha256.New, k, string(body))),
				"X-GitHub-Delivery", id, "X-GitHub-Event", "issues"), body}
		case "gitlab":
			if c.scheme == verify.SchemeStandardWebhooks {
				h := swSign(t, k, "webhook", body, id, now)
				h.Set("X-Gitlab-Event", "Push Hook")
				h.Set("Idempotency-Key", id)
				return signedDelivery{h, body}
			}
			return signedDelivery{hdrs("X-Gitlab-Token", k, "Idempotency-Key", id, "X-Gitlab-Event", "Push Hook"), body}
		case "shopify":
			return signedDelivery{hdrs("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(macOf(sha256.New, k, string(body))),
				"X-Shopify-Webhook-Id", id, "X-Shopify-Topic", "orders/create"), body}
		case "slack":
			return signedDelivery{hdrs("X-Slack-Signature", "v0="+hex.EncodeToString(macOf(sha256.New, k, "v0:"+ts(now)+":", string(body))),
				"X-Slack-Request-Timestamp", ts(now)), body}
		case "twilio":
			form, err := url.ParseQuery(string(body))
			if err != nil {
				t.Fatal(err)
			}
			return signedDelivery{hdrs("X-Twilio-Signature", twilioSig(k, twilioURL, form)), body}
		case "paddle":
			return signedDelivery{hdrs("Paddle-Signature", "ts="+ts(now)+";h1="+hex.EncodeToString(macOf(sha256.New, k, ts(now)+":", string(body)))), body}
		case "linear":
			return signedDelivery{hdrs("Linear-Signature", hex.EncodeToString(macOf(sha256.New, k, string(body))),
				"Linear-Delivery", id, "Linear-Event", "Issue"), body}
		case "discord":
			sig := ed25519.Sign(discordKeys[key], append([]byte(ts(now)), body...))
			return signedDelivery{hdrs("X-Signature-Ed25519", hex.EncodeToString(sig), "X-Signature-Timestamp", ts(now)), body}
		case "mailgun":
			return signedDelivery{http.Header{}, mailgunBody(k, "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0", now, string(body))}
		case "sendgrid":
			d := sha256.Sum256(append([]byte(ts(now)), body...))
			sig, err := ecdsa.SignASN1(rand.Reader, sendgridKey[key], d[:])
			if err != nil {
				t.Fatal(err)
			}
			return signedDelivery{hdrs("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig),
				"X-Twilio-Email-Event-Webhook-Timestamp", ts(now)), body}
		case "zoom":
			return signedDelivery{hdrs("x-zm-signature", "v0="+hex.EncodeToString(macOf(sha256.New, k, "v0:"+ts(now)+":", string(body))),
				"x-zm-request-timestamp", ts(now)), body}
		case "square":
			return signedDelivery{hdrs("x-square-hmacsha256-signature", base64.StdEncoding.EncodeToString(macOf(sha256.New, k, squareURL, string(body)))), body}
		}
		t.Fatalf("no signer for %s", c.provider)
		return signedDelivery{}
	}
}

func (c providerCase) source(secrets ...string) Source {
	s := Source{Name: c.provider, Provider: c.provider, Scheme: c.scheme, Secrets: secrets}
	if c.extra != nil {
		c.extra(&s)
	}
	return s
}

func (c providerCase) verifier(t *testing.T, secrets ...string) verify.Verifier {
	t.Helper()
	v, err := verify.New(c.source(secrets...).Verify())
	if err != nil {
		t.Fatalf("%s: %v", c.provider, err)
	}
	return v
}

// check runs d through v at now and checks the outcome (wantErr nil: the
// case's result) and that CheckHeader agrees with Verify.
func check(t *testing.T, what string, v verify.Verifier, d signedDelivery, now time.Time, want verify.Result, wantErr error) {
	t.Helper()
	r := verify.Request{Header: d.h, Body: d.body, Now: now}
	got, err := v.Verify(r)
	// A nonce (mailgun's token) differs with each signing; verify's
	// TestMailgunNonce checks it.
	got.Nonce, got.NonceSigned, got.NonceExpires = "", time.Time{}, time.Time{}
	if wantErr == nil && (err != nil || got != want) {
		t.Fatalf("%s: Verify = %+v, %v; want %+v", what, got, err, want)
	}
	if wantErr != nil && !errors.Is(err, wantErr) {
		t.Fatalf("%s: Verify = %+v, %v; want an error wrapping %v", what, got, err, wantErr)
	}
	if herr := v.CheckHeader(verify.Request{Header: d.h, Now: now}); herr != nil && (err == nil || herr != err) {
		t.Fatalf("%s: CheckHeader = %v, Verify = %v", what, herr, err)
	}
}

func TestPresetsVerifyProviderSignatures(t *testing.T) {
	cases := providerCases()
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.provider] = true
		name := c.provider
		if c.scheme != "" {
			name += "/" + c.scheme
		}
		t.Run(name, func(t *testing.T) {
			a, b := c.secrets[0], c.secrets[1]
			good := c.sign(t, 0, c.body, c.id, presetNow)
			check(t, "valid", c.verifier(t, a), good, presetNow, c.want, nil)
			check(t, "rotated keys, old one signs", c.verifier(t, b, a), good, presetNow, c.want, nil)
			check(t, "rotated keys, new one signs", c.verifier(t, b, a), c.sign(t, 1, c.body, c.id, presetNow), presetNow, c.want, nil)
			check(t, "wrong key", c.verifier(t, b), good, presetNow, verify.Result{}, verify.ErrUnauthorized)
			if c.tamper != nil {
				check(t, "tampered", c.verifier(t, a), c.tamper(good), presetNow, verify.Result{}, verify.ErrUnauthorized)
			}
			for i, strip := range c.strip {
				check(t, fmt.Sprintf("signature part %d missing", i), c.verifier(t, a), strip(good), presetNow, verify.Result{}, verify.ErrUnauthorized)
			}
			tol := time.Duration(c.source(a).Verify().Tolerance)
			if tol == 0 {
				tol = verify.DefaultTolerance
			}
			stale := c.sign(t, 0, c.body, c.id, presetNow.Add(-tol-time.Minute))
			future := c.sign(t, 0, c.body, c.id, presetNow.Add(tol+time.Minute))
			if c.timestamped {
				check(t, "stale", c.verifier(t, a), stale, presetNow, verify.Result{}, verify.ErrUnauthorized)
				check(t, "future", c.verifier(t, a), future, presetNow, verify.Result{}, verify.ErrUnauthorized)
				check(t, "at the edge of the tolerance", c.verifier(t, a), c.sign(t, 0, c.body, c.id, presetNow.Add(-tol)), presetNow, c.want, nil)
			} else {
				check(t, "no timestamp signed", c.verifier(t, a), stale, presetNow, c.want, nil)
			}
			// hookbox send's signature passes the same verifier.
			cfg := c.source(a).Verify()
			switch c.provider {
			case "discord":
				cfg.SigningKey = hex.EncodeToString(discordKeys[0].Seed())
			case "sendgrid":
				der, _ := x509.MarshalPKCS8PrivateKey(sendgridKey[0])
				cfg.SigningKey = base64.StdEncoding.EncodeToString(der)
			}
			body := c.body
			if c.provider == "mailgun" {
				body = []byte(`{"event-data":` + string(c.body) + `}`)
			}
			h, sent, err := verify.SignRequest(cfg, body, firstNonEmpty(c.id, "msg_send"), presetNow)
			if err != nil {
				t.Fatalf("SignRequest: %v", err)
			}
			if _, err := c.verifier(t, a).Verify(verify.Request{Header: h, Body: sent, Now: presetNow}); err != nil {
				t.Fatalf("Verify(SignRequest): %v", err)
			}
		})
	}
	for _, p := range Presets {
		if !covered[p.Name] {
			t.Errorf("preset %s has no case here", p.Name)
		}
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestPresetVectors checks presets against signatures their providers'
// libraries and docs publish, and checks that those libraries accept what
// hookbox send signs.
func TestPresetVectors(t *testing.T) {
	t.Run("github docs", func(t *testing.T) {
		// GitHub's "Validating webhook deliveries" example.
		v, err := verify.New(Source{Provider: "github", Secrets: []string{"It's a Secret to Everybody"}}.Verify())
		if err != nil {
			t.Fatal(err)
		}
		h := hdrs("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "X-GitHub-Delivery", "d1")
		if _, err := v.Verify(verify.Request{Header: h, Body: []byte("Hello, World!")}); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(verify.Request{Header: h, Body: []byte("Hello, World?")}); !errors.Is(err, verify.ErrUnauthorized) {
			t.Fatalf("tampered: %v", err)
		}
	})
	t.Run("slack-go vector", func(t *testing.T) {
		// The valid request of slack-go's security_test.go.
		body := []byte(`{"token":"aF5ynEYQH0dFN9imlgcADxDB","team_id":"XXXXXXXXX","api_app_id":"YYYYYYYYY","event":{"type":"app_mention","user":"AAAAAAAAA","text":"<@EEEEEEEEE> hello world","client_msg_id":"477cc591-ch73-a14z-4db8-g0cd76321bec","ts":"1531431954.000073","channel":"TTTTTTTTT","event_ts":"1531431954.000073"},"type":"event_callback","event_id":"TvBP7LRED7","event_time":1531431954,"authed_users":["EEEEEEEEE"]}`)
		h := hdrs("X-Slack-Signature", "v0=adada4ed31709aef585c2580ca3267678c6a8eaeb7e0c1aca3ee57b656886b2c", "X-Slack-Request-Timestamp", "1531431954")
		v, err := verify.New(Source{Provider: "slack", Secrets: []string{"e6b19c573432dcc6b075501d51b51bb8"}}.Verify())
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(verify.Request{Header: h, Body: body, Now: time.Unix(1531431954, 0)})
		if err != nil || got.DeliveryID != "TvBP7LRED7" || got.EventType != "app_mention" {
			t.Fatalf("Verify = %+v, %v", got, err)
		}
		if _, err := v.Verify(verify.Request{Header: h, Body: body, Now: time.Unix(1531431954, 0).Add(6 * time.Minute)}); !errors.Is(err, verify.ErrUnauthorized) {
			t.Fatalf("stale: %v", err)
		}
	})
	t.Run("slack-go accepts hookbox send", func(t *testing.T) {
		const secret = "e6b19c573432dcc6b075501d51b51bb8"
		body := []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`)
		h, err := verify.Sign(Source{Provider: "slack", Secrets: []string{secret}}.Verify(), body, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := slackEnsure(h, secret, body); err != nil {
			t.Fatalf("slack-go: %v", err)
		}
		if err := slackEnsure(h, secret, append(body, ' ')); err == nil {
			t.Fatal("slack-go accepted a tampered body: the check proves nothing")
		}
	})
	t.Run("twilio-go vector", func(t *testing.T) {
		// The signature twilio-go's request_validator_test.go checks.
		const u = "https://mycompany.com/myapp.php?foo=1&bar=2"
		form := url.Values{"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"}, "Caller": {"+14158675309"},
			"From": {"+14158675309"}, "ReasonConferenceEnded": {"test"}, "Reason": {"Participant"}}
		v, err := verify.New(Source{Provider: "twilio", Secrets: []string{"12345"}, PublicURL: u}.Verify())
		if err != nil {
			t.Fatal(err)
		}
		h := hdrs("X-Twilio-Signature", "vOEb5UThFn24KEfnOFLQY2AE5FY=")
		if _, err := v.Verify(verify.Request{Header: h, Body: []byte(form.Encode())}); err != nil {
			t.Fatal(err)
		}
		// Twilio may sign the URL with the default port written out.
		v, err = verify.New(Source{Provider: "twilio", Secrets: []string{"12345"}, PublicURL: "https://mycompany.com:443/myapp.php?foo=1&bar=2"}.Verify())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(verify.Request{Header: h, Body: []byte(form.Encode())}); err != nil {
			t.Fatalf("with :443: %v", err)
		}
		form.Set("Digits", "1235")
		if _, err := v.Verify(verify.Request{Header: h, Body: []byte(form.Encode())}); !errors.Is(err, verify.ErrUnauthorized) {
			t.Fatalf("tampered: %v", err)
		}
	})
	t.Run("twilio-go accepts hookbox send", func(t *testing.T) {
		body := []byte(url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}, "To": {"+15550001111"}}.Encode())
		h, err := verify.Sign(Source{Provider: "twilio", Secrets: []string{"tw-token"}, PublicURL: twilioURL}.Verify(), body, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !twilioValidate("tw-token", twilioURL, body, h.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go refused hookbox send's signature")
		}
		if twilioValidate("tw-token", twilioURL, append(body, 'x'), h.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go accepted a tampered body: the check proves nothing")
		}
	})
	t.Run("stripe-go accepts hookbox send", func(t *testing.T) {
		const secret = "whsec_presetStripeA_0123456789"
		body := []byte(`{"id":"evt_9","object":"event","type":"charge.succeeded","api_version":"2025-06-30.basil"}`)
		h, err := verify.Sign(Source{Provider: "stripe", Secrets: []string{secret}}.Verify(), body, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := webhook.ConstructEventWithOptions(body, h.Get("Stripe-Signature"), secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}); err != nil {
			t.Fatalf("stripe-go: %v", err)
		}
	})
	t.Run("standard-webhooks library accepts hookbox send", func(t *testing.T) {
		secret := swSecrets()[0]
		body := []byte(`{"type":"t"}`)
		h, err := verify.Sign(Source{Provider: "svix", Secrets: []string{secret}}.Verify(), body, "msg_1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("standard-webhooks: %v", err)
		}
	})
}

func TestPresetExplicitKeysWin(t *testing.T) {
	s := Source{Provider: "shopify", Secrets: []string{"s"}, IDField: "id", TypeHeader: "X-Custom-Topic", Tolerance: Duration(time.Minute)}.WithPreset()
	if s.Scheme != "hmac" || s.Header != "X-Shopify-Hmac-Sha256" || s.Encoding != "base64" {
		t.Fatalf("preset keys not filled: %+v", s)
	}
	// The id's place and the type's are each taken whole from the source.
	if s.IDField != "id" || s.IDHeader != "" || s.TypeHeader != "X-Custom-Topic" || s.TypeField != "" {
		t.Fatalf("id/type places = %q %q %q %q", s.IDHeader, s.IDField, s.TypeHeader, s.TypeField)
	}
	s = Source{Provider: "slack", Secrets: []string{"s"}, Header: "X-Other-Signature", Handshake: "zoom"}.WithPreset()
	if s.Header != "X-Other-Signature" || s.Prefix != "v0=" || s.Handshake != "zoom" {
		t.Fatalf("explicit keys lost: %+v", s)
	}
	if got := (Source{Secrets: []string{"s"}, Scheme: "github"}).WithPreset(); got.Header != "" {
		t.Fatalf("no provider, yet keys filled: %+v", got)
	}
}

func TestProviderErrors(t *testing.T) {
	t.Setenv("HB_PROVIDER", "stipe-secret-looking-value")
	cases := []struct{ yaml, want string }{
		{"provider: stipe\n    secrets: [x]", "sources[0] (a).provider: unknown provider; known: stripe, github, gitlab, shopify, slack, twilio, paddle, linear, discord, mailgun, sendgrid, polar, svix, clerk, resend, zoom, square"},
		{"provider: ${HB_PROVIDER}\n    secrets: [x]", "provider: unknown provider; known: stripe"},
		{"provider: stripe\n    scheme: github\n    secrets: [x]", "sources[0] (a).scheme: provider stripe signs with stripe; remove scheme, or provider"},
		{"provider: gitlab\n    scheme: hmac\n    secrets: [x]", "provider gitlab signs with token or standard-webhooks"},
		{"provider: twilio\n    secrets: [x]", "sources[0] (a): public_url: is required"},
		{"provider: square\n    secrets: [x]\n    public_url: /webhooks/square", "public_url: must be an absolute"},
		{"provider: discord\n    secrets: [not-a-key]", "secrets[0]: not an ed25519 public key"},
		{"provider: sendgrid\n    secrets: [not-a-key]", "secrets[0]: not an ECDSA P-256 public key"},
		{"provider: stripe", "secrets: at least one secret is required"},
	}
	for _, c := range cases {
		_, err := Parse([]byte("sources:\n  - name: a\n    store_only: true\n    " + c.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "stipe-secret-looking-value") {
			t.Errorf("error repeats an environment value: %v", err)
		}
	}
	c, err := Parse([]byte("sources:\n  - name: a\n    store_only: true\n    provider: gitlab\n    scheme: standard-webhooks\n    secrets: [whsec_c2VjcmV0]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Sources[0].Verify(); v.TypeHeader != "X-Gitlab-Event" || v.Header != "" {
		t.Fatalf("gitlab signing-token keys = %+v", v)
	}
	// Parse applies the preset, so that code reading a Source sees it.
	c, err = Parse([]byte("sources:\n  - {name: a, store_only: true, provider: shopify, secrets: [x]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sources[0]; s.Scheme != "hmac" || s.Header != "X-Shopify-Hmac-Sha256" || s.Provider != "shopify" {
		t.Fatalf("parsed source %+v", s)
	}
}

func TestRetentionGuard(t *testing.T) {
	doc := func(days int) []byte {
		return []byte(fmt.Sprintf(`retention_days: %d
sources:
  - {name: s, provider: stripe, secrets: [x], store_only: true}
  - {name: g, provider: github, secrets: [x], store_only: true}
  - {name: d, provider: discord, secrets: ["%s"], store_only: true}
`, days, hex.EncodeToString(discordKeys[0].Public().(ed25519.PublicKey))))
	}
	retention := func(c *Config) []string {
		var ws []string
		for _, w := range c.Warnings {
			if strings.HasPrefix(w, "retention_days") {
				ws = append(ws, w)
			}
		}
		return ws
	}
	c, err := Parse(doc(2))
	if err != nil {
		t.Fatal(err)
	}
	ws := retention(c)
	if len(ws) != 2 || !strings.Contains(ws[0], "stripe") || !strings.Contains(ws[0], "source s") || !strings.Contains(ws[0], "set retention_days to 3 or more") ||
		!strings.Contains(ws[1], "github") {
		t.Fatalf("warnings = %q", ws)
	}
	for _, days := range []int{0, 3, 30} {
		c, err := Parse(doc(days))
		if err != nil {
			t.Fatal(err)
		}
		if ws := retention(c); len(ws) != 0 {
			t.Errorf("retention_days %d: warnings %q", days, ws)
		}
	}
	// RETENTION_DAYS in hookbox serve replaces the warnings.
	c.SetRetentionDays(30)
	if ws := retention(c); len(ws) != 0 {
		t.Fatalf("after SetRetentionDays(30): %q", ws)
	}
	c.SetRetentionDays(1)
	if ws := retention(c); len(ws) != 2 {
		t.Fatalf("after SetRetentionDays(1): %q", ws)
	}
}

func TestEveryPresetIsDocumented(t *testing.T) {
	readme, err := readREADME()
	if err != nil {
		t.Fatal(err)
	}
	_, readme, _ = strings.Cut(readme, "## Provider presets")
	readme, _, _ = strings.Cut(readme, "\n## ")
	seen := map[string]bool{}
	for _, p := range Presets {
		if seen[p.Name] {
			t.Errorf("preset %s twice", p.Name)
		}
		seen[p.Name] = true
		if p.RedeliveryNote == "" {
			t.Errorf("preset %s: no RedeliveryNote", p.Name)
		}
		_, row, found := strings.Cut(readme, "| `"+p.Name+"` |")
		row, _, _ = strings.Cut(row, "\n")
		if !found {
			t.Errorf("README's table of presets has no row for %s", p.Name)
		} else if !strings.Contains(row, "`"+p.Keys.Scheme+"`") {
			t.Errorf("README's row for %s does not name its scheme %s: %s", p.Name, p.Keys.Scheme, row)
		}
	}
}

func TestProviderOrSchemeRequired(t *testing.T) {
	_, err := Parse([]byte("sources:\n  - {name: a, secrets: [x], store_only: true}\n"))
	if err == nil || !strings.Contains(err.Error(), "sources[0] (a).provider: or scheme is required: a provider (stripe, github,") {
		t.Fatalf("error %v", err)
	}
}

// TestRejectedAgeGuard: a log of refused deliveries kept longer than the
// shortest retention window (payload_retention_days, else retention_days)
// is a warning that names both and the max_age to set; one within it, or
// no window, is none. RETENTION_DAYS in serve brings it up to date.
func TestRejectedAgeGuard(t *testing.T) {
	doc := func(keys string) []byte {
		return []byte(keys + `
sources:
  - {name: s, scheme: hmac, header: X-Sig, secrets: [long-enough-secret], store_only: true}
`)
	}
	rejectedWarnings := func(c *Config) []string {
		var ws []string
		for _, w := range c.Warnings {
			if strings.HasPrefix(w, "rejected.max_age") {
				ws = append(ws, w)
			}
		}
		return ws
	}
	for _, tc := range []struct {
		keys, want string
	}{
		{"payload_retention_days: 3", "rejected.max_age 168h keeps refused deliveries (headers and bodies) longer than payload_retention_days 3 keeps payloads: set rejected.max_age to 72h or less"},
		{"retention_days: 2\npayload_retention_days: 1\nrejected: {max_age: 36h}", "longer than payload_retention_days 1 keeps payloads: set rejected.max_age to 24h or less"},
		{"retention_days: 5", "rejected.max_age 168h keeps refused deliveries (headers and bodies) longer than retention_days 5"},
		{"payload_retention_days: 3\nrejected: {max_age: 72h}", ""},
		{"payload_retention_days: 30", ""},
		{"", ""},
	} {
		c, err := Parse(doc(tc.keys))
		if err != nil {
			t.Fatal(err)
		}
		ws := rejectedWarnings(c)
		switch {
		case tc.want == "" && len(ws) != 0:
			t.Errorf("%q: warnings %q, want none", tc.keys, ws)
		case tc.want != "" && (len(ws) != 1 || !strings.Contains(ws[0], tc.want)):
			t.Errorf("%q: warnings %q, want one with %q", tc.keys, ws, tc.want)
		}
	}
	c, err := Parse(doc("payload_retention_days: 30"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetentionDays(2)
	if ws := rejectedWarnings(c); len(ws) != 1 || !strings.Contains(ws[0], "retention_days 2") {
		t.Fatalf("after SetRetentionDays(2): %q", ws)
	}
	c.SetRetentionDays(30)
	if ws := rejectedWarnings(c); len(ws) != 0 {
		t.Fatalf("after SetRetentionDays(30): %q", ws)
	}
}

// TestIDOptionalNeedsAPlace: id_optional without id_header or id_field is
// refused at load, saying what to set: a source with neither keys every
// delivery by its body hash already, and the key would read as if it did
// something.
func TestIDOptionalNeedsAPlace(t *testing.T) {
	_, err := Parse([]byte("sources:\n  - {name: a, scheme: hmac, header: X-Sig, secrets: [x], id_optional: true, store_only: true}\n"))
	if err == nil || !strings.Contains(err.Error(), "id_optional: set id_header or id_field") {
		t.Fatalf("id_optional without a place for the id: %v", err)
	}
	if _, err := Parse([]byte("sources:\n  - {name: a, scheme: hmac, header: X-Sig, secrets: [x], id_header: X-Id, id_optional: true, store_only: true}\n")); err != nil {
		t.Fatalf("id_optional with id_header: %v", err)
	}
}
