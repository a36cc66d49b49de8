package target_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
)

// TestEchoedSecretEscapedSlash: an app that refuses a forward and
// echoes its Authorization in a JSON reply, as PHP's json_encode writes
// it ("/" as "\/"), must not put the configured token in the error,
// with or without a Redactor.
func TestEchoedSecretEscapedSlash(t *testing.T) {
	const token = "AbC/dEf+GhI/jKl0123456=="
	auth := "Bearer " + token
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusUnauthorized)
		echo := strings.ReplaceAll(r.Header.Get("Authorization"), "/", `\/`)
		w.Write([]byte(`{"error":"bad token","got":"` + echo + `"}`))
	})
	for _, red := range []*redact.Redactor{nil, redact.New(redact.HeaderSecrets(auth)...)} {
		// Without a Redactor, the forward masks by its own list of its
		// secrets; with one (as serve builds it), by both.
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{"Authorization": auth}, Redactor: red})
		err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil {
			t.Fatal("want an error")
		}
		if strings.Contains(strings.ReplaceAll(err.Error(), `\/`, "/"), token) {
			t.Errorf("Redactor %v: error shows the token: %v", red != nil, err)
		}
	}
}
