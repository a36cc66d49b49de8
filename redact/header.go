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
// (whatever its length), and, when it has the shape of an Authorization
// value, "scheme credential" (Bearer X, Token X, Basic X), the credential
// alone, as an app that refuses it tends to echo it ("invalid token X");
// for Basic, also the "user:password" it encodes and the password alone.
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
	if !ok || cred == "" || !isToken(scheme) {
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

// isToken reports whether s is an HTTP token (RFC 9110), such as an
// authentication scheme's name.
func isToken(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return s != ""
}
