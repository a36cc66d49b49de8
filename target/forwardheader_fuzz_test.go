package target_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/target"
)

// neverForwarded are the sender headers ForwardHeader's documentation
// says are left out, in lower case, written out here from the list
// rather than taken from the code; a name ending in "*" stands for every
// name that starts with what precedes it.
var neverForwarded = []string{
	// Hop by hop, and what the client computes.
	"connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
	"te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect",
	"proxy", "proxy-*",
	// Routing.
	"forwarded", "x-forwarded", "x-forwarded-*", "via", "x-real-ip", "x-client-ip", "true-client-ip",
	"x-cluster-client-ip", "x-original-forwarded-for", "x-host", "x-original-host", "x-scheme",
	"x-url-scheme", "front-end-https", "cf-connecting-ip", "fastly-client-ip", "x-envoy-*",
	"x-original-url", "x-original-uri", "x-rewrite-url", "x-original-method", "x-http-method",
	// Encodings, credentials, trace context.
	"content-encoding", "accept-encoding", "authorization", "cookie",
	"traceparent", "tracestate", "baggage",
	// Identity asserted by an authenticating proxy.
	"remote-user", "x-remote-*", "x-auth-request-*", "gap-auth", "x-webauth-*", "x-amzn-oidc-*",
	"x-amzn-mtls-*", "x-goog-authenticated-user-*", "x-goog-iap-jwt-assertion",
	"x-ms-client-principal*", "x-ms-token-*", "cf-access-*", "x-pomerium-*", "tailscale-user-*",
	"x-vouch-*", "x-ssl-*", "ssl-client-*", "x-client-cert*", "x-client-verify", "x-client-dn",
	"x-arr-clientcert",
	// What hookbox sets.
	"idempotency-key", "hookbox-*",
}

// appName is a header's name as an app reads it through a gateway
// interface (CGI, FastCGI and PHP, WSGI, Rack: HTTP_X_FORWARDED_FOR), in
// lower case with "-" for "_": such an app cannot tell X_Forwarded_For
// from X-Forwarded-For.
func appName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// leftOut reports whether the reference leaves out a sender's header of
// this name: one of neverForwarded or X-*-Method-Override, as an app
// reads names (appName).
func leftOut(name string) bool {
	n := appName(name)
	if strings.HasPrefix(n, "x-") && strings.HasSuffix(n, "-method-override") {
		return true
	}
	for _, p := range neverForwarded {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(n, prefix) || n == p {
			return true
		}
	}
	return false
}

// token reports whether name is an RFC 9110 token, the only header names
// net/http receives (and so stores) or sends.
func token(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// FuzzForwardHeader gives ForwardHeader stored headers of any names and
// values (raw holds one a line, "name:value"; names that are not tokens,
// which net/http never receives, are left out) and checks it against the
// documented list: no header the reference leaves out, nor one a
// Connection header names, reaches the app, whatever its case or its "_"
// for "-"; every other comes through under its canonical name with all
// of its values.
func FuzzForwardHeader(f *testing.F) {
	f.Add("Content-Type:application/json\nX-Forwarded-For:10.0.0.1\nWebhook-Id:msg_1")
	f.Add("x-forwarded-host:evil\nCONNECTION:x-secret, keep-alive\nx-secret:1\nX-Keep:2")
	f.Add("X-HTTP-Method-Override:DELETE\nHookbox-Attempt:9\nproxy:http://evil\nIdempotency-Key:k")
	f.Add("X_Forwarded_For:10.0.0.1\nX-Real_Ip:1.2.3.4\nx_remote_user:admin\nX_Custom:ok")
	f.Fuzz(func(t *testing.T, raw string) {
		stored := http.Header{}
		for _, line := range strings.Split(raw, "\n") {
			name, value, ok := strings.Cut(line, ":")
			if ok && token(name) {
				stored[name] = append(stored[name], value)
			}
		}
		named := map[string]bool{}
		for k, vs := range stored {
			if http.CanonicalHeaderKey(k) != "Connection" {
				continue
			}
			for _, v := range vs {
				for _, n := range strings.Split(v, ",") {
					named[http.CanonicalHeaderKey(strings.TrimSpace(n))] = true
				}
			}
		}
		want := http.Header{}
		for k, vs := range stored {
			key := http.CanonicalHeaderKey(k)
			if !leftOut(k) && !named[key] {
				want[key] = append(want[key], vs...)
			}
		}
		got := target.ForwardHeader(stored)
		for k := range got {
			if leftOut(k) || named[k] {
				t.Errorf("%q forwarded; the app would read it as %q, which is never forwarded", k, appName(k))
			}
		}
		for k, vs := range want {
			if len(vs) == 0 {
				continue
			}
			if !slices.Equal(slices.Sorted(slices.Values(got[k])), slices.Sorted(slices.Values(vs))) {
				t.Errorf("%q: forwarded %q, want %q", k, got[k], vs)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok && !leftOut(k) && !named[k] {
				t.Errorf("%q forwarded, never stored", k)
			}
		}
	})
}
