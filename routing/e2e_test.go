package routing_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

// TestNullKeyIsNotHeld: with order_by data.customer, a delivery whose
// customer is null that goes dead (max_attempts 1, on_dead holding the
// key by default) does not hold a later delivery whose customer is null
// too: neither has the value, so each waits for no other.
func TestNullKeyIsNotHeld(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("secret-of-the-routing-e2e-test"))
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"id":"evt_1"`) {
				http.Error(w, "refused", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(app.Close)
		srv := e2e.Start(t, fmt.Sprintf(`
sources:
  - name: stripe
    scheme: standard-webhooks
    secrets: [%q]
    max_attempts: 1
    targets:
      - name: billing
        forward: %s
        order_by: data.customer
`, secret, app.URL), dbURL, nil)
		status := func(id int64) hookbox.Status {
			t.Helper()
			e, err := srv.Svc.Store.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return e.Status
		}
		first := srv.Send("stripe", "evt_1", []byte(`{"type":"payment_intent.succeeded","id":"evt_1","data":{"customer":null}}`)).ID
		srv.WaitIdle(30 * time.Second)
		if s := status(first); s != hookbox.StatusDead {
			t.Fatalf("the first event is %s, want dead", s)
		}
		second := srv.Send("stripe", "evt_2", []byte(`{"type":"payment_intent.succeeded","id":"evt_2","data":{"customer":null}}`)).ID
		srv.WaitIdle(30 * time.Second)
		if s := status(second); s != hookbox.StatusDone {
			t.Errorf("the second event is %s, want done", s)
		}
		keys := map[string]int64{}
		for _, e := range srv.Events("stripe") {
			if e.Parent == 0 {
				continue
			}
			if other, ok := keys[e.OrderKey]; ok {
				t.Errorf("deliveries %d and %d share the order key %q", other, e.ID, e.OrderKey)
			}
			keys[e.OrderKey] = e.ID
		}
	})
}
