package verify

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewValidation(t *testing.T) {
	const leaky = "whsec_SUPER-SECRET-VALUE!!"
	cases := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" means valid
	}{
		{"standard-webhooks", Config{Scheme: "standard-webhooks", Secrets: []string{swSecretA}}, ""},
		{"stripe", Config{Scheme: "stripe", Secrets: []string{stripeSecretA, stripeSecretB}, Tolerance: time.Minute}, ""},
		{"github", Config{Scheme: "github", Secrets: []string{ghSecretA}}, ""},
		{"hmac minimal", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig"}, ""},
		{"hmac full", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Prefix: "sha1=", Encoding: "base64", Algorithm: "sha1", IDField: "id", TypeHeader: "X-T"}, ""},
		{"none", Config{Scheme: "none"}, ""},
		{"none with id", Config{Scheme: "none", IDHeader: "X-Id", TypeField: "type"}, ""},
		{"missing scheme", Config{Secrets: []string{"s"}}, "scheme: is required"},
		{"unknown scheme", Config{Scheme: "svix", Secrets: []string{"s"}}, `scheme: unknown scheme "svix"`},
		{"no secrets", Config{Scheme: "stripe"}, "secrets: at least one"},
		{"empty secret", Config{Scheme: "github", Secrets: []string{"a", ""}}, "secrets[1]: must not be empty"},
		{"bad whsec base64", Config{Scheme: "standard-webhooks", Secrets: []string{swSecretA, leaky}}, "secrets[1]: whsec_ secret is not valid base64"},
		{"empty whsec key", Config{Scheme: "standard-webhooks", Secrets: []string{"whsec_"}}, "secrets[0]: whsec_ secret holds an empty key"},
		{"none with secrets", Config{Scheme: "none", Secrets: []string{leaky}}, "secrets: not used by the none scheme"},
		{"negative tolerance", Config{Scheme: "stripe", Secrets: []string{"s"}, Tolerance: -time.Second}, "tolerance: must not be negative"},
		{"hmac without header", Config{Scheme: "hmac", Secrets: []string{"s"}}, "hmac: header is required"},
		{"hmac bad header name", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X Sig"}, "header: not a valid header name"},
		{"hmac bad encoding", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Encoding: "base32"}, "encoding: must be hex or base64"},
		{"hmac bad algorithm", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Algorithm: "md5"}, "algorithm: must be sha256, sha1, sha512, ed25519 or ecdsa-p256"},
		{"hmac prefix with space", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Prefix: "v0= "}, "prefix: must not"},
		{"hmac id header and field", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", IDHeader: "X-Id", IDField: "id"}, "id_header, id_field: set at most one"},
		{"none type header and field", Config{Scheme: "none", TypeHeader: "X-T", TypeField: "t"}, "type_header, type_field: set at most one"},
		{"none bad id header", Config{Scheme: "none", IDHeader: "X:Id"}, "id_header: not a valid header name"},
		{"none bad type header", Config{Scheme: "none", TypeHeader: "X\nT"}, "type_header: not a valid header name"},
		{"stripe with header", Config{Scheme: "stripe", Secrets: []string{"s"}, Header: "X-Sig"}, "header: only used by the hmac and token schemes"},
		{"none with encoding", Config{Scheme: "none", Encoding: "hex"}, "encoding: only used by the hmac scheme"},
		{"github with id_header", Config{Scheme: "github", Secrets: []string{"s"}, IDHeader: "X-Id"}, "id_header: only used by the schemes whose id is not fixed"},
		{"standard-webhooks with type_field", Config{Scheme: "standard-webhooks", Secrets: []string{swSecretA}, TypeField: "kind"}, ""},
		{"standard-webhooks with id_field", Config{Scheme: "standard-webhooks", Secrets: []string{swSecretA}, IDField: "id"}, "id_field: only used by"},
		{"standard-webhooks whsk_ secret", Config{Scheme: "standard-webhooks", Secrets: []string{"whsk_" + leaky}}, "secrets[0]: a whsk_ key is the sender's private key"},
		{"standard-webhooks bad whpk_", Config{Scheme: "standard-webhooks", Secrets: []string{"whpk_" + leaky}}, "secrets[0]: whpk_ key is not base64"},
		{"hmac ed25519 bad key", Config{Scheme: "hmac", Secrets: []string{leaky}, Header: "X-Sig", Algorithm: "ed25519"}, "secrets[0]: not an ed25519 public key"},
		{"hmac ecdsa bad key", Config{Scheme: "hmac", Secrets: []string{leaky}, Header: "X-Sig", Algorithm: "ecdsa-p256"}, "secrets[0]: not an ECDSA P-256 public key"},
		{"hmac signed without body", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "v0:{timestamp}"}, "signed: must end with {body}"},
		{"hmac signed unknown placeholder", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{ts}{body}"}, "signed: unknown placeholder"},
		{"hmac timestamp without header", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{timestamp}{body}"}, "timestamp_header: is required"},
		{"hmac timestamp header unused", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", TimestampHeader: "X-Ts"}, "signed: must use {timestamp}"},
		{"hmac url without public_url", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{url}{body}"}, "public_url: is required"},
		{"hmac relative public_url", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{url}{body}", PublicURL: "/hooks"}, "public_url: must be an absolute"},
		{"twilio without public_url", Config{Scheme: "twilio", Secrets: []string{"s"}}, "public_url: is required"},
		{"token without header", Config{Scheme: "token", Secrets: []string{"s"}}, "token: header is required"},
		{"basic without colon", Config{Scheme: "basic", Secrets: []string{leaky}}, "secrets[0]: must be user:password"},
		{"stripe with public_url", Config{Scheme: "stripe", Secrets: []string{"s"}, PublicURL: "https://x"}, "public_url: only used by"},
		{"none with handshake", Config{Scheme: "none", Handshake: "slack"}, "handshake: only used by"},
		{"unknown handshake", Config{Scheme: "github", Secrets: []string{"s"}, Handshake: "teams"}, "handshake: must be slack, zoom or discord"},
		{"zoom handshake on github", Config{Scheme: "github", Secrets: []string{"s"}, Handshake: "zoom"}, "handshake: zoom needs the hmac scheme"},
		{"hmac timestamp in ms", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{timestamp}:{body}", TimestampHeader: "X-Ts", TimestampUnit: "ms"}, ""},
		{"hmac timestamp in s", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{timestamp}:{body}", TimestampHeader: "X-Ts", TimestampUnit: "s"}, ""},
		{"hmac timestamp unit unknown", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", Signed: "{timestamp}:{body}", TimestampHeader: "X-Ts", TimestampUnit: "millis"},
			"timestamp_unit: must be s (unix seconds, 10 digits today; the default) or ms (unix milliseconds, 13 digits today"},
		{"hmac timestamp unit without timestamp", Config{Scheme: "hmac", Secrets: []string{"s"}, Header: "X-Sig", TimestampUnit: "ms"}, "timestamp_unit: only used with timestamp_header and {timestamp} in signed"},
		{"stripe with timestamp unit", Config{Scheme: "stripe", Secrets: []string{"s"}, TimestampUnit: "ms"}, "timestamp_unit: only used by the hmac scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(tc.cfg)
			if tc.want == "" {
				if err != nil || v == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v, want error %q", tc.cfg, tc.want)
			}
			if v != nil {
				t.Fatalf("New returned a non-nil Verifier (%T) with its error", v)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error %q, want it to contain %q", err, tc.want)
			}
			for _, s := range tc.cfg.Secrets {
				if len(strings.TrimPrefix(s, "whsec_")) > 1 && strings.Contains(err.Error(), s) {
					t.Fatalf("New error %q contains a secret", err)
				}
			}
			if _, serr := Sign(tc.cfg, nil, "id", time.Time{}); serr == nil || serr.Error() != err.Error() {
				t.Fatalf("Sign error %v, want the New error %v", serr, err)
			}
		})
	}
}

// TestErrorsNeverLeak provokes every failure it can for every scheme and
// checks that no error text carries a secret, a key, or the expected
// signature in any encoding.
func TestErrorsNeverLeak(t *testing.T) {
	body := eventBody
	const id = "msg_leak"
	var forbidden []string
	addMAC := func(mac []byte) {
		forbidden = append(forbidden, hex.EncodeToString(mac), strings.ToUpper(hex.EncodeToString(mac)),
			base64.StdEncoding.EncodeToString(mac), base64.RawStdEncoding.EncodeToString(mac),
			hex.EncodeToString(mac)[:16], base64.StdEncoding.EncodeToString(mac)[:12])
	}
	for _, s := range []string{swSecretA, swSecretB, stripeSecretA, stripeSecretB, ghSecretA, ghSecretB, hmacSecretA, hmacSecretB} {
		forbidden = append(forbidden, s, strings.TrimPrefix(s, "whsec_"))
	}
	forbidden = append(forbidden, string(swKeyA), string(swKeyB))
	ts := testNow.Unix()
	for _, k := range [][]byte{swKeyA, swKeyB} {
		addMAC(mac256(k, []byte(fmt.Sprintf("%s.%d.%s", id, ts, body))))
	}
	for _, s := range []string{stripeSecretA, stripeSecretB} {
		addMAC(mac256([]byte(s), []byte(fmt.Sprintf("%d.%s", ts, body))))
	}
	for _, s := range []string{ghSecretA, ghSecretB, hmacSecretA, hmacSecretB} {
		addMAC(mac256([]byte(s), body))
		addMAC(macWith(sha512.New, s, body))
	}

	wrongSW := libSW(t, swSecretB, false, id, testNow, []byte("other"))
	wrongHex := hexMAC("nope", body)
	verifiers := []struct {
		cfg     Config
		headers []http.Header
	}{
		{Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA, swSecretB}}, []http.Header{
			swHdr(id, testNow, wrongSW), swHdr(id, testNow, "v1,xyz"), swHdr(id, testNow.Add(time.Hour), wrongSW),
			hdr("webhook-signature", wrongSW), hdr("webhook-id", id, "webhook-signature", wrongSW, "webhook-timestamp", "x"), {},
		}},
		{Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA, stripeSecretB}}, []http.Header{
			stripeHdr(fmt.Sprintf("t=%d,v1=%s", ts, wrongHex)), stripeHdr("t=1,v1=" + wrongHex), stripeHdr("x"), stripeHdr("t=1"), {},
		}},
		{Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA, ghSecretB}}, []http.Header{
			ghHdr("sha256="+wrongHex, "d", ""), ghHdr("sha256=zz", "d", ""), ghHdr("sha256="+hexMAC(ghSecretA, body), "", ""), {},
		}},
		{Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA, hmacSecretB}, Header: "X-Sig", Algorithm: "sha512", Encoding: "base64", IDField: "nope"}, []http.Header{
			hdr("X-Sig", "AAAA"), hdr("X-Sig", base64.StdEncoding.EncodeToString(make([]byte, 64))),
			hdr("X-Sig", base64.StdEncoding.EncodeToString(macWith(sha512.New, hmacSecretA, body))), {},
		}},
	}
	n := 0
	for _, tv := range verifiers {
		v := mustNew(t, tv.cfg)
		for _, h := range tv.headers {
			for _, b := range [][]byte{body, []byte("not json"), nil} {
				_, err := v.Verify(Request{Header: h, Body: b, Now: testNow})
				if err == nil {
					continue
				}
				n++
				if !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrMalformed) {
					t.Errorf("%s: error %q wraps no sentinel", tv.cfg.Scheme, err)
				}
				for _, f := range forbidden {
					if strings.Contains(err.Error(), f) {
						t.Errorf("%s: error %q leaks %q", tv.cfg.Scheme, err, f)
					}
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d failures provoked; the test lost its teeth", n)
	}
}

func TestZeroNowMeansWallClock(t *testing.T) {
	cfg := Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}
	v := mustNew(t, cfg)
	h := stripeHdr(libStripe(stripeSecretA, time.Now(), eventBody))
	if _, err := v.Verify(Request{Header: h, Body: eventBody}); err != nil {
		t.Fatalf("fresh signature with zero Now: %v", err)
	}
	h = stripeHdr(libStripe(stripeSecretA, testNow, eventBody))
	if _, err := v.Verify(Request{Header: h, Body: eventBody}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("2023 signature with zero Now: %v", err)
	}
}

func TestWithinToleranceSaturates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, ts := range []int64{0, 999_999_999_999_999_999, 1_700_000_000 - 301, 1_700_000_000 + 301} {
		if withinTolerance(ts, now, DefaultTolerance) {
			t.Errorf("withinTolerance(%d) = true", ts)
		}
	}
	for _, ts := range []int64{1_700_000_000, 1_700_000_000 - 300, 1_700_000_000 + 300} {
		if !withinTolerance(ts, now, DefaultTolerance) {
			t.Errorf("withinTolerance(%d) = false", ts)
		}
	}
}

// TestConcurrentVerify exercises the pooled MAC states from many goroutines
// (meaningful under -race) and checks no state bleeds between requests.
func TestConcurrentVerify(t *testing.T) {
	cfg := Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretB, swSecretA}}
	v := mustNew(t, cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				id := fmt.Sprintf("msg_%d_%d", g, i)
				body := []byte(fmt.Sprintf(`{"type":"t%d"}`, i))
				h, err := Sign(Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}, body, id, testNow)
				if err != nil {
					errs <- err
					return
				}
				r, err := v.Verify(Request{Header: h, Body: body, Now: testNow})
				if err != nil || r.DeliveryID != id {
					errs <- fmt.Errorf("good %s: %+v %v", id, r, err)
					return
				}
				if _, err := v.Verify(Request{Header: h, Body: append(body, ' '), Now: testNow}); err == nil {
					errs <- fmt.Errorf("tampered %s accepted", id)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// allocsChild marks the test binary TestVerifyAllocations starts without
// -race, so that it cannot start another.
const allocsChild = "HOOKBOX_TEST_ALLOCS_CHILD"

// TestVerifyAllocations guards the hot path: the pooled MAC states mean a
// verification allocates only the strings it returns. Allocation counts
// are meaningless under -race; CI runs every test with it, so there the
// test runs itself again in a test binary built without it.
func TestVerifyAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped with -short")
	}
	if raceEnabled {
		if os.Getenv("CI") == "" {
			t.Skip("allocation counts are meaningless under -race")
		}
		if os.Getenv(allocsChild) != "" {
			t.Fatal("the test binary meant to count allocations was built with -race too (GOFLAGS?)")
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			t.Fatalf("CI counts allocations without -race with the go command: %v", err)
		}
		cmd := exec.Command(goTool, "test", "-count=1", "-run", "^TestVerifyAllocations$", ".")
		cmd.Env = append(os.Environ(), allocsChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("allocations counted without -race: %v\n%s", err, out)
		}
		return
	}
	for _, b := range benchSetups(t) {
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := b.v.Verify(b.req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > float64(b.maxAllocs) {
			t.Errorf("%s: %.0f allocations per Verify, want at most %d", b.name, allocs, b.maxAllocs)
		}
	}
}

func TestBodyHash(t *testing.T) {
	sum := sha256.Sum256([]byte("abc"))
	if got := bodyHash([]byte("abc")); got != hex.EncodeToString(sum[:]) {
		t.Fatal(got)
	}
}

// flipLastHex changes the last hex digit of s.
func flipLastHex(s string) string {
	b := []byte(s)
	if b[len(b)-1] == '0' {
		b[len(b)-1] = '1'
	} else {
		b[len(b)-1] = '0'
	}
	return string(b)
}

// TestNearMissSignatures checks that signatures differing from the right one
// only in their last byte are refused, so the whole digest is compared.
func TestNearMissSignatures(t *testing.T) {
	body := eventBody
	ts := fmt.Sprint(testNow.Unix())
	swMAC := mac256(swKeyA, []byte("msg_1."+ts+"."+string(body)))
	swMAC[31] ^= 0x80
	stripeHex := flipLastHex(hexMAC(stripeSecretA, []byte(ts+"."+string(body))))
	ghHex := flipLastHex(hexMAC(ghSecretA, body))
	mac512 := macWith(sha512.New, hmacSecretA, body)
	mac512[63] ^= 1
	cases := []struct {
		cfg Config
		h   http.Header
	}{
		{Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}, swHdr("msg_1", testNow, "v1,"+base64.StdEncoding.EncodeToString(swMAC))},
		{Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}, stripeHdr("t=" + ts + ",v1=" + stripeHex)},
		{Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}, ghHdr("sha256="+ghHex, "d", "")},
		{Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig"}, hdr("X-Sig", flipLastHex(hexMAC(hmacSecretA, body)))},
		{Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Algorithm: "sha512", Encoding: "base64"},
			hdr("X-Sig", base64.StdEncoding.EncodeToString(mac512))},
	}
	for _, tc := range cases {
		_, err := mustNew(t, tc.cfg).Verify(Request{Header: tc.h, Body: body, Now: testNow})
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s %s: near-miss signature not refused: %v", tc.cfg.Scheme, tc.cfg.Algorithm, err)
		}
	}
}

// TestCheckHeader: what the headers alone show to be unauthenticated is
// refused without the body, scheme by scheme; a well-formed signature
// header with a timestamp in the window passes (the body decides).
func TestCheckHeader(t *testing.T) {
	sw := Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}
	stripe := Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}
	gh := Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}
	hm := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", Prefix: "sha256="}
	ts := fmt.Sprint(testNow.Unix())
	old := fmt.Sprint(testNow.Add(-6 * time.Minute).Unix())
	ahead := fmt.Sprint(testNow.Add(6 * time.Minute).Unix())
	zeros64 := strings.Repeat("0", 64)
	swSig := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	cases := []struct {
		name   string
		cfg    Config
		header http.Header
		ok     bool
	}{
		{"standard-webhooks: well-formed", sw, hdr("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", swSig), true},
		{"standard-webhooks: no signature", sw, hdr("webhook-id", "msg_1", "webhook-timestamp", ts), false},
		{"standard-webhooks: malformed signature", sw, hdr("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", "v1,zz"), false},
		{"standard-webhooks: no id", sw, hdr("webhook-timestamp", ts, "webhook-signature", swSig), false},
		{"standard-webhooks: no timestamp", sw, hdr("webhook-id", "msg_1", "webhook-signature", swSig), false},
		{"standard-webhooks: stale", sw, hdr("webhook-id", "msg_1", "webhook-timestamp", old, "webhook-signature", swSig), false},
		{"standard-webhooks: future", sw, hdr("webhook-id", "msg_1", "webhook-timestamp", ahead, "webhook-signature", swSig), false},
		{"stripe: well-formed", stripe, hdr("Stripe-Signature", "t="+ts+",v1="+zeros64), true},
		{"stripe: no signature", stripe, hdr(), false},
		{"stripe: malformed", stripe, hdr("Stripe-Signature", "t=x,v1="+zeros64), false},
		{"stripe: no v1", stripe, hdr("Stripe-Signature", "t="+ts), false},
		{"stripe: stale", stripe, hdr("Stripe-Signature", "t="+old+",v1="+zeros64), false},
		{"stripe: future", stripe, hdr("Stripe-Signature", "t="+ahead+",v1="+zeros64), false},
		{"github: well-formed", gh, hdr("X-Hub-Signature-256", "sha256="+zeros64), true},
		{"github: no signature", gh, hdr("X-GitHub-Delivery", "d1"), false},
		{"github: malformed", gh, hdr("X-Hub-Signature-256", "sha256="+zeros64[:10]), false},
		{"hmac: well-formed", hm, hdr("X-Sig", "sha256="+zeros64), true},
		{"hmac: no signature", hm, hdr(), false},
		{"hmac: malformed", hm, hdr("X-Sig", zeros64), false},
		{"none: anything", Config{Scheme: SchemeNone}, hdr(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := mustNew(t, tc.cfg)
			err := v.CheckHeader(Request{Header: tc.header, Now: testNow})
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckHeader: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("CheckHeader = %v, want an error wrapping ErrUnauthorized", err)
			}
			// Verify says the same, whatever the body.
			if _, verr := v.Verify(Request{Header: tc.header, Body: eventBody, Now: testNow}); verr != err {
				t.Fatalf("Verify error %v, CheckHeader error %v: want the same", verr, err)
			}
		})
	}
}

// TestRepeatedHeaderLines: a header the scheme reads, sent on two lines,
// is refused whatever the lines hold (the valid value twice, a forged one
// before or after it), with a reason that says so and the kind of error
// its absence gets; CheckHeader agrees. Before, only the first line
// counted, so the answer depended on the lines' order.
func TestRepeatedHeaderLines(t *testing.T) {
	body := eventBody
	hm := Config{Scheme: SchemeHMAC, Secrets: []string{hmacSecretA}, Header: "X-Sig", TimestampHeader: "X-Ts", Signed: "{timestamp}.{body}"}
	cases := []struct {
		cfg  Config
		id   string
		keys []string
	}{
		{Config{Scheme: SchemeStandardWebhooks, Secrets: []string{swSecretA}}, "msg_1", []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}},
		{Config{Scheme: SchemeStripe, Secrets: []string{stripeSecretA}}, "", []string{"Stripe-Signature"}},
		{Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}, "d-1", []string{"X-Hub-Signature-256", "X-Github-Delivery"}},
		{hm, "", []string{"X-Sig", "X-Ts"}},
		{Config{Scheme: SchemeToken, Secrets: []string{hmacSecretA}, Header: "X-Token"}, "", []string{"X-Token"}},
	}
	for _, tc := range cases {
		v := mustNew(t, tc.cfg)
		signed, err := Sign(tc.cfg, body, tc.id, testNow)
		if err != nil {
			t.Fatalf("%s: Sign: %v", tc.cfg.Scheme, err)
		}
		if _, err := v.Verify(Request{Header: signed, Body: body, Now: testNow}); err != nil {
			t.Fatalf("%s: the signed request itself: %v", tc.cfg.Scheme, err)
		}
		for _, k := range tc.keys {
			valid := signed.Get(k)
			if valid == "" {
				t.Fatalf("%s: Sign set no %s", tc.cfg.Scheme, k)
			}
			for name, lines := range map[string][]string{
				"twice":              {valid, valid},
				"forged, then valid": {"x" + valid, valid},
				"valid, then forged": {valid, "x" + valid},
			} {
				h := signed.Clone()
				h[k] = lines
				r := Request{Header: h, Body: body, Now: testNow}
				_, err := v.Verify(r)
				if err == nil {
					t.Errorf("%s: %s %s: accepted", tc.cfg.Scheme, k, name)
					continue
				}
				if !strings.Contains(err.Error(), k+" header sent more than once") {
					t.Errorf("%s: %s %s: %v, want it to say the header was sent more than once", tc.cfg.Scheme, k, name, err)
				}
				missing := signed.Clone()
				missing.Del(k)
				_, absentErr := v.Verify(Request{Header: missing, Body: body, Now: testNow})
				if errors.Is(absentErr, ErrMalformed) != errors.Is(err, ErrMalformed) {
					t.Errorf("%s: %s %s: %v, not the kind of error its absence gets (%v)", tc.cfg.Scheme, k, name, err, absentErr)
				}
				checkHeaderAgrees(t, v, r, err)
			}
		}
	}
}
