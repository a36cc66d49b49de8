package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// tokenVerifier verifies the two schemes that carry the secret itself
// rather than a signature: "token", a shared token in a configured header
// (GitLab's X-Gitlab-Token), and "basic", HTTP basic auth whose secrets are
// "user:password". Neither covers the body, so anyone who sees one
// delivery can send others: prefer a signing scheme where the sender has
// one. Both are judged from the headers alone, so CheckHeader refuses a
// wrong token before the body is read.
//
// The received value and each secret are compared as SHA-256 digests with
// hmac.Equal: the time taken depends on neither the secret's bytes nor its
// length.
type tokenVerifier struct {
	basic   bool
	header  string // canonical key
	digests [][sha256.Size]byte
	first   string // the first secret, for Sign
	ids     idSpec

	errMiss, errBad, errMatch error
}

func newToken(cfg Config) (*tokenVerifier, error) {
	v := &tokenVerifier{basic: cfg.Scheme == SchemeBasic, first: cfg.Secrets[0]}
	if v.basic {
		v.header = "Authorization"
		for i, s := range cfg.Secrets {
			if !strings.Contains(s, ":") {
				return nil, fmt.Errorf("secrets[%d]: must be user:password", i)
			}
		}
		v.errMiss = unauthorized("basic: missing Authorization header")
		v.errBad = unauthorized("basic: Authorization header is not Basic credentials")
		v.errMatch = unauthorized("basic: credentials do not match")
	} else {
		if cfg.Header == "" {
			return nil, errors.New("token: header is required (the header that carries the token, e.g. X-Gitlab-Token)")
		}
		if !httpguts.ValidHeaderFieldName(cfg.Header) {
			return nil, errors.New("header: not a valid header name")
		}
		v.header = http.CanonicalHeaderKey(cfg.Header)
		v.errMiss = unauthorized("token: missing " + cfg.Header + " header")
		v.errBad = v.errMiss
		v.errMatch = unauthorized("token: " + cfg.Header + " header does not match")
	}
	// The id and the type are stored, listed and logged; the token is
	// the secret itself (basic's Authorization too).
	for key, name := range map[string]string{"id_header": cfg.IDHeader, "type_header": cfg.TypeHeader} {
		if name != "" && http.CanonicalHeaderKey(name) == v.header {
			return nil, fmt.Errorf("%s: %s is the header that carries the %s's secret itself, which would be stored, listed and logged as each delivery's %s; name another header, or leave %s out",
				key, v.header, cfg.Scheme, strings.TrimSuffix(key, "_header"), key)
		}
	}
	for _, s := range cfg.Secrets {
		v.digests = append(v.digests, sha256.Sum256([]byte(s)))
	}
	ids, err := newIDSpec(cfg.Scheme, cfg)
	if err != nil {
		return nil, err
	}
	v.ids = ids
	return v, nil
}

// credentialHeaders implements CredentialHeaders.
func (v *tokenVerifier) credentialHeaders() []string { return []string{v.header} }

// CredentialHeaders returns the canonical names of the request headers
// that carry a source's secret itself rather than a signature made with it
// (the token scheme's header; basic's Authorization), nil for the signing
// schemes. Whoever stores, forwards or shows a delivery's headers must
// leave these out: anyone who read one could send deliveries.
func CredentialHeaders(v Verifier) []string {
	for {
		if c, ok := v.(interface{ credentialHeaders() []string }); ok {
			return c.credentialHeaders()
		}
		w, ok := v.(wrapper)
		if !ok {
			return nil
		}
		v = w.inner()
	}
}

// SignatureHeaders returns the canonical names of the request headers
// that carry a source's signature under a name its configuration chose
// (the hmac scheme's header, which may be X-Sig or any name that does not
// say it holds a signature), nil for the other schemes, whose signature
// headers have fixed names that do (Webhook-Signature, Stripe-Signature,
// X-Hub-Signature-256, X-Twilio-Signature; see
// redact.IsCredentialHeader). A signature is no secret, but a sender set
// up wrong may send the secret itself there (a token where a signature
// was expected): whoever keeps refused deliveries' headers, to be shown
// without the configuration at hand, marks these to be masked.
func SignatureHeaders(v Verifier) []string {
	for {
		if c, ok := v.(interface{ signatureHeaders() []string }); ok {
			return c.signatureHeaders()
		}
		w, ok := v.(wrapper)
		if !ok {
			return nil
		}
		v = w.inner()
	}
}

// CheckHeader implements Verifier: the token is in the headers, so this is
// the whole check.
func (v *tokenVerifier) CheckHeader(r Request) error {
	h, ok := headerValue(r.Header, v.header)
	if !ok || h == "" {
		return absent(r.Header, v.errMiss, v.header)
	}
	var got [sha256.Size]byte
	if v.basic {
		creds, ok := parseBasicAuth(h)
		if !ok {
			return v.errBad
		}
		got = sha256.Sum256(creds)
	} else {
		got = sha256.Sum256([]byte(h))
	}
	for i := range v.digests {
		if hmac.Equal(got[:], v.digests[i][:]) {
			return nil
		}
	}
	return v.errMatch
}

// Verify implements Verifier.
func (v *tokenVerifier) Verify(r Request) (Result, error) {
	if err := v.CheckHeader(r); err != nil {
		return Result{}, err
	}
	return v.ids.extract(r)
}

// maxBasicAuth bounds the Authorization header decoded.
const maxBasicAuth = 4096

// parseBasicAuth decodes "Basic <base64 of user:password>" (the scheme
// name in any case) and returns the credentials.
func parseBasicAuth(h string) ([]byte, bool) {
	if len(h) > maxBasicAuth || len(h) < 6 || !strings.EqualFold(h[:6], "Basic ") {
		return nil, false
	}
	creds, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[6:]))
	if err != nil || !strings.Contains(string(creds), ":") {
		return nil, false
	}
	return creds, true
}

func (v *tokenVerifier) sign(_ []byte, deliveryID string, _ time.Time) (http.Header, error) {
	h := make(http.Header, 2)
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, err
	}
	if v.basic {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(v.first)))
	} else {
		h.Set(v.header, v.first)
	}
	return h, nil
}
