package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Fixed values shared by the tests. The secrets are distinctive so that a
// leak into an error string is easy to spot.
var (
	testNow = time.Unix(1_700_000_000, 0)

	swKeyA    = []byte("0123456789abcdef-SWKEY-A-secret!")
	swKeyB    = []byte("fedcba9876543210-SWKEY-B-secret!")
	swSecretA = "whsec_" + base64.StdEncoding.EncodeToString(swKeyA)
	swSecretB = "whsec_" + base64.StdEncoding.EncodeToString(swKeyB)

	stripeSecretA = "whsec_STRIPE_SECRET_AAAAAAAAAAAAAAAA"
	stripeSecretB = "whsec_STRIPE_SECRET_BBBBBBBBBBBBBBBB"

	ghSecretA = "github-secret-AAAA-0b6e"
	ghSecretB = "github-secret-BBBB-91c4"

	hmacSecretA = "hmac-secret-AAAA-5f1d"
	hmacSecretB = "hmac-secret-BBBB-77aa"

	eventBody = []byte(`{"id":"evt_1NZ2abc","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","type":"nested"}}}`)
)

// hdr builds a header from key/value pairs, canonicalising keys as net/http
// does for a server request.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func mac256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func hexMAC(key string, msg []byte) string { return hex.EncodeToString(mac256([]byte(key), msg)) }

func mustNew(t testing.TB, cfg Config) Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return v
}

// verifyCase is one row of a scheme's table.
type verifyCase struct {
	name    string
	cfg     Config // zero Scheme means the table's default config
	header  http.Header
	body    []byte
	now     time.Time // zero means testNow
	wantErr error     // nil, ErrUnauthorized or ErrMalformed
	errText string    // substring the error must contain
	want    Result
}

func runCases(t *testing.T, def Config, cases []verifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := def
			if tc.cfg.Scheme != "" {
				cfg = tc.cfg
			}
			v := mustNew(t, cfg)
			now := tc.now
			if now.IsZero() {
				now = testNow
			}
			got, err := v.Verify(Request{Header: tc.header, Body: tc.body, Now: now})
			checkOutcome(t, got, err, tc.want, tc.wantErr, tc.errText)
			checkHeaderAgrees(t, v, Request{Header: tc.header, Now: now}, err)
		})
	}
}

func checkOutcome(t *testing.T, got Result, err error, want Result, wantErr error, errText string) {
	t.Helper()
	if wantErr == nil {
		if err != nil {
			t.Fatalf("Verify: unexpected error %v", err)
		}
		if got != want {
			t.Fatalf("Verify = %+v, want %+v", got, want)
		}
		return
	}
	if err == nil {
		t.Fatalf("Verify = %+v, want error wrapping %v", got, wantErr)
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("Verify error %q does not wrap %v", err, wantErr)
	}
	other := ErrMalformed
	if wantErr == ErrMalformed {
		other = ErrUnauthorized
	}
	if errors.Is(err, other) {
		t.Fatalf("Verify error %q wraps both sentinels", err)
	}
	if errText != "" && !strings.Contains(err.Error(), errText) {
		t.Fatalf("Verify error %q does not mention %q", err, errText)
	}
	if got != (Result{}) {
		t.Fatalf("Verify returned %+v alongside an error", got)
	}
}

// checkHeaderAgrees checks CheckHeader on r (headers only) against the
// error Verify returned for the whole request: it may refuse only what
// Verify refused, and only with Verify's error.
func checkHeaderAgrees(t *testing.T, v Verifier, r Request, verifyErr error) {
	t.Helper()
	err := v.CheckHeader(r)
	if err == nil {
		return
	}
	if verifyErr == nil {
		t.Fatalf("CheckHeader refused (%v) a request Verify accepts", err)
	}
	if err.Error() != verifyErr.Error() || errors.Is(err, ErrMalformed) != errors.Is(verifyErr, ErrMalformed) {
		t.Fatalf("CheckHeader error %q, Verify error %q: want the same", err, verifyErr)
	}
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("CheckHeader error %q does not wrap ErrUnauthorized", err)
	}
}
