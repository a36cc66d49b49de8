package target_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
)

// TestForwardMasksURLPathSecret: a forward URL whose path carries its
// credential (Slack's and Discord's incoming webhooks) keeps it out of the
// error when the receiver echoes the path, while route words and numeric
// ids stay readable. Only the password and query were masked.
func TestForwardMasksURLPathSecret(t *testing.T) {
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "no route for %s", r.URL.Path)
	})
	discord := "hT3x_9kLmQ-" + strings.Repeat("aB4", 19)
	for _, c := range []struct{ path, secret, shown string }{
		{"/services/T0001/B0001/XyZ9abcdefGHIJKLmnop1234", "XyZ9abcdefGHIJKLmnop1234", "/services/T0001/B0001/"},
		{"/api/webhooks/112233445566778899/" + discord, discord, "/api/webhooks/112233445566778899/"},
	} {
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL + c.path})
		err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil || strings.Contains(err.Error(), c.secret) || !strings.Contains(err.Error(), c.shown+"[REDACTED]") {
			t.Errorf("%s: error %v, want the path shown with its token masked", c.path, err)
		}
	}
}
