package redact_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/redact"
)

const (
	adminToken = "adm-7f3a9c0e5b21d4"
	whsec      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	whsecKey   = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

func TestStringMasksEverySecretAndItsForms(t *testing.T) {
	r := redact.New(adminToken, whsec, "p&ss word/+=\"x")
	for _, in := range []string{
		"token " + adminToken + " end",
		"ADMIN=" + adminToken + "\nPOLAR=" + whsec,
		"key only: " + whsecKey,
		"b64: " + base64.StdEncoding.EncodeToString([]byte(adminToken)),
		"b64url: " + base64.URLEncoding.EncodeToString([]byte("p&ss word/+=\"x")),
		"query: ?t=" + url.QueryEscape("p&ss word/+=\"x"),
		`json: {"s":"p&ss word/+=\"x"}`,
		adminToken + adminToken,
	} {
		out := r.String(in)
		for _, secret := range []string{adminToken, whsecKey, "p&ss word", "cCZzcyB3b3Jk", "p%26ss"} {
			if strings.Contains(out, secret) {
				t.Errorf("String(%q) = %q: still holds %q", in, out, secret)
			}
		}
		if !strings.Contains(out, redact.Mask) {
			t.Errorf("String(%q) = %q: no mask", in, out)
		}
	}
	if got := r.String("token " + adminToken + " end"); got != "token [REDACTED] end" {
		t.Errorf("got %q", got)
	}
	// A whsec_ secret is masked whole, not as "whsec_[REDACTED]".
	if got := r.String("s=" + whsec); got != "s=[REDACTED]" {
		t.Errorf("got %q", got)
	}
}

func TestShortSecretsIgnored(t *testing.T) {
	if r := redact.New("test", "", "1234567"); r != nil {
		t.Fatalf("New with only short secrets = %+v, want nil", r)
	}
	r := redact.New("test", "12345678")
	if got := r.String("testing 12345678"); got != "testing [REDACTED]" {
		t.Errorf("got %q", got)
	}
}

func TestNilRedactor(t *testing.T) {
	var r *redact.Redactor
	if r.String("x") != "x" || r.Tail("abcdef", 3) != "def" || r.Longest() != 0 {
		t.Error("nil Redactor changed text")
	}
	err := errors.New("e")
	if r.Error(err) != err {
		t.Error("nil Redactor wrapped an error")
	}
}

// TestTailNeverShowsPartOfASecret: cutting a stream's end at any byte shows
// no fragment of a secret of MinLen or more bytes.
func TestTailNeverShowsPartOfASecret(t *testing.T) {
	r := redact.New(adminToken)
	stream := strings.Repeat("x", 30) + adminToken + strings.Repeat("y", 30) + adminToken + "zz"
	for n := 1; n < len(stream); n++ {
		// s is what a bounded reader kept: n shown bytes and Longest() of
		// context, itself cut from the stream at an arbitrary byte.
		keep := min(len(stream), n+r.Longest())
		s := stream[len(stream)-keep:]
		out := r.Tail(s, n)
		for k := MinFragment; k <= len(adminToken); k++ {
			for i := 0; i+k <= len(adminToken); i++ {
				if strings.Contains(out, adminToken[i:i+k]) {
					t.Fatalf("Tail(%q, %d) = %q shows %q", s, n, out, adminToken[i:i+k])
				}
			}
		}
	}
}

// MinFragment is the shortest piece of a secret that counts as shown: the
// filler bytes 'x', 'y', 'z' cannot form two of its bytes.
const MinFragment = 2

func TestErrorKeepsIdentity(t *testing.T) {
	r := redact.New(adminToken)
	base := errors.New("base")
	err := r.Error(fmt.Errorf("run with %s: %w", adminToken, base))
	if err.Error() != "run with [REDACTED]: base" {
		t.Errorf("Error() = %q", err.Error())
	}
	if !errors.Is(err, base) {
		t.Error("masked error lost its cause")
	}
	plain := errors.New("nothing secret")
	if r.Error(plain) != plain {
		t.Error("an error without secrets was wrapped")
	}
}

func TestHeaderMasksCredentials(t *testing.T) {
	r := redact.New("whsec_c2VjcmV0LWZvci10ZXN0cw==")
	h := http.Header{
		"Webhook-Signature":     {"v1,abcdef"},
		"Stripe-Signature":      {"t=1,v1=00"},
		"X-Gitlab-Token":        {"plain-token"},
		"X-My-Mac":              {"deadbeef"},
		"Content-Type":          {"application/json"},
		"X-Echo":                {"leaked whsec_c2VjcmV0LWZvci10ZXN0cw== here"},
		"X-Shopify-Hmac-Sha256": {"abc="},
	}
	got := r.Header(h, "x-my-mac")
	for _, k := range []string{"Webhook-Signature", "Stripe-Signature", "X-Gitlab-Token", "X-My-Mac", "X-Shopify-Hmac-Sha256"} {
		if got.Get(k) != redact.Mask {
			t.Errorf("%s shown as %q, want masked", k, got.Get(k))
		}
	}
	if got.Get("Content-Type") != "application/json" || got.Get("X-Echo") != "leaked "+redact.Mask+" here" {
		t.Errorf("other headers: %v", got)
	}
	if h.Get("Webhook-Signature") != "v1,abcdef" {
		t.Errorf("Header changed its argument")
	}
	var none *redact.Redactor
	if none.Header(http.Header{"X-Hub-Signature-256": {"sha256=00"}}).Get("X-Hub-Signature-256") != redact.Mask {
		t.Errorf("a nil Redactor must still mask signature headers")
	}
}

// TestHeaderSecretsFindsTheCredential: a header value shaped "scheme
// credential" gives its credential too (and Basic's user:password and
// password), for an app may echo the credential alone; a value of
// another shape, and parts shorter than MinLen, give the value alone.
func TestHeaderSecretsFindsTheCredential(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("hookbox:basic-password-1"))
	for value, want := range map[string][]string{
		"Bearer app-secret-token-1": {"Bearer app-secret-token-1", "app-secret-token-1"},
		"Basic " + basic:            {"Basic " + basic, basic, "hookbox:basic-password-1", "basic-password-1"},
		"Token short":               {"Token short"},
		"plain-shared-secret":       {"plain-shared-secret"},
		"key=value with spaces":     {"key=value with spaces"},
		"platform engineering":      {"platform engineering"}, // no scheme: masked whole only
		"bearer lowercase-scheme-1": {"bearer lowercase-scheme-1", "lowercase-scheme-1"},
		"":                          nil,
	} {
		if got := redact.HeaderSecrets(value); !slices.Equal(got, want) {
			t.Errorf("HeaderSecrets(%q) = %q, want %q", value, got, want)
		}
	}
}
