package redact

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// credentialWords are parts of header names that carry a signature or a
// credential: Webhook-Signature, Stripe-Signature, X-Hub-Signature-256,
// X-Shopify-Hmac-Sha256, X-Gitlab-Token, X-Api-Key and the like.
var credentialWords = []string{"sign", "hmac", "token", "secret", "auth", "key", "pass", "cookie", "session", "credential"}

// IsCredentialHeader reports whether a header of this name may carry a
// signature or a credential, judged by its name alone.
func IsCredentialHeader(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// ShowHeader returns a copy of h with the value of every header that may
// carry a signature or credential (IsCredentialHeader) replaced by Mask:
// the default wherever stored headers are shown without a configuration's
// secrets at hand.
func ShowHeader(h http.Header) http.Header { return (*Redactor)(nil).Header(h) }

// Header returns a copy of h fit to show: the value of every header that
// may carry a signature or credential (IsCredentialHeader, or one of
// extra, such as a source's configured signature header) replaced by Mask,
// and every configured secret masked in the other values. Names are kept.
func (r *Redactor) Header(h http.Header, extra ...string) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		hide := IsCredentialHeader(k)
		for _, e := range extra {
			hide = hide || strings.EqualFold(k, e)
		}
		shown := make([]string, len(vs))
		for i, v := range vs {
			if hide {
				shown[i] = Mask
			} else {
				shown[i] = r.String(v)
			}
		}
		out[k] = shown
	}
	return out
}

// HeaderSecrets returns the secrets a configured header value holds, to
// be masked wherever a reply or an error may quote them: the value itself
// (whatever its length), and, when it is "scheme credential" in one of the
// authentication schemes credentialSchemes names (Bearer X, Token X,
// Basic X), the credential alone, as an app that refuses it tends to echo
// it ("invalid token X"); for Basic, also the "user:password" it encodes
// and the password alone. Other two-word values ("platform engineering")
// are masked whole only: their second word is no credential to mask in
// every log line.
// The parts are left out when shorter than MinLen, as masking a short one
// everywhere would garble the text it is found in.
func HeaderSecrets(value string) []string {
	if value == "" {
		return nil
	}
	out := []string{value}
	add := func(s string) {
		if len(s) >= MinLen && s != value {
			out = append(out, s)
		}
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
	cred = strings.TrimSpace(cred)
	if !ok || cred == "" || !credentialSchemes[strings.ToLower(scheme)] {
		return out
	}
	add(cred)
	if strings.EqualFold(scheme, "Basic") {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if b, err := enc.DecodeString(cred); err == nil {
				userpass := string(b)
				add(userpass)
				if _, pw, ok := strings.Cut(userpass, ":"); ok {
					add(pw)
				}
				break
			}
		}
	}
	return out
}

// credentialSchemes are the authentication schemes, in lower case, whose
// credential HeaderSecrets masks on its own: the usual ones for API keys
// and tokens in an Authorization header.
var credentialSchemes = map[string]bool{
	"bearer": true, "basic": true, "token": true, "bot": true, "apikey": true, "api-key": true,
	"key": true, "ssws": true, "splunk": true, "oauth": true, "sso-key": true, "genie-key": true,
}
