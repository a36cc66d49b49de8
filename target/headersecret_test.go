package target_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
)

// TestForwardHeaderCredentialEchoedMasked: an app that refuses the
// credential of a forward header and echoes it ("invalid token X") does
// not put it in the attempt's error, whatever the header's scheme
// (Bearer X; Basic, whose user:password and password are echoed decoded).
// The header's value was masked only whole, so the bare credential went
// into the attempt rows, last_error and the log.
func TestForwardHeaderCredentialEchoedMasked(t *testing.T) {
	const token, user, password = "app-secret-token-123456", "hookbox", "app-basic-password-789"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	for _, c := range []struct {
		value  string
		echo   func(*http.Request) string
		secret string
	}{
		{"Bearer " + token, func(r *http.Request) string {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}, token},
		{"Basic " + basic, func(r *http.Request) string {
			u, p, _ := r.BasicAuth()
			return u + ":" + p
		}, password},
		{"Basic " + basic, func(r *http.Request) string {
			_, p, _ := r.BasicAuth()
			return p
		}, password},
	} {
		app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid credentials %s"}`, c.echo(r))
		})
		// The Redactor the service gives a target masks the header value
		// whole, as before: the target must find the credential itself.
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL + "/hook",
			Headers: map[string]string{"Authorization": c.value}, Redactor: redact.New(c.value)})
		err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil {
			t.Fatal("a 401 taken for done")
		}
		if strings.Contains(err.Error(), c.secret) || !strings.Contains(err.Error(), redact.Mask) {
			t.Errorf("header %q: the error shows the credential the app echoed, or masks nothing: %s", c.value, err)
		}
	}
}
