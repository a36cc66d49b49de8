package redact

import (
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
