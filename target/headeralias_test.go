package target_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/target"
)

// cgiName is how an app behind CGI, FastCGI, WSGI or Rack reads a header
// name: upper case, "-" as "_" (HTTP_X_API_KEY).
func cgiName(name string) string { return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }

// TestConfiguredHeaderUnderscoreAlias: a header configured on the
// forward (forward_headers) replaces the sender's header of the same name;
// the sender's X_Api_Key, which a CGI/WSGI/Rack app reads as the same
// HTTP_X_API_KEY, must not reach the app beside it either (as the dropped
// list already reads "_" as "-").
func TestConfiguredHeaderUnderscoreAlias(t *testing.T) {
	app := newSink(t, status(http.StatusOK, ""))
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{
		"X-Api-Key": "configured-key-value", "X-Tenant": "acme",
	}})
	stored := http.Header{}
	stored["X_api_key"] = []string{"from the sender"}
	stored["X_Tenant"] = []string{"evil"}
	got := forwarded(t, app, f, stored)
	for name, vs := range got {
		switch cgiName(name) {
		case "X_API_KEY":
			if strings.Join(vs, ",") != "configured-key-value" {
				t.Errorf("app got %s: %q beside the configured X-Api-Key (both read as HTTP_X_API_KEY)", name, vs)
			}
		case "X_TENANT":
			if strings.Join(vs, ",") != "acme" {
				t.Errorf("app got %s: %q beside the configured X-Tenant (both read as HTTP_X_TENANT)", name, vs)
			}
		}
	}
}

// TestSignedForwardUnderscoreAlias: a signed forward replaces the
// sender's webhook-id, webhook-timestamp and webhook-signature with its
// own; the sender's Webhook_Id etc. must not reach the app beside them.
func TestSignedForwardUnderscoreAlias(t *testing.T) {
	app := newSink(t, status(http.StatusOK, ""))
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Sign: &target.SignOptions{Secret: swSecret}})
	stored := http.Header{}
	stored["Webhook_id"] = []string{"evil-id"}
	stored["Webhook_timestamp"] = []string{"1"}
	got := forwarded(t, app, f, stored)
	for name, vs := range got {
		switch cgiName(name) {
		case "WEBHOOK_ID", "WEBHOOK_TIMESTAMP":
			if name != http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-")) || len(vs) != 1 || vs[0] == "evil-id" || vs[0] == "1" {
				t.Errorf("app got %s: %q beside hookbox's own", name, vs)
			}
		}
	}
}
