package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

// TestConsoleDeliveries: the page of an event with named targets lists
// its delivery to each target with its own status, a delivery's page
// links back to its event, and replaying the dead delivery from the
// console runs it alone.
func TestConsoleDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var failing atomic.Bool
		failing.Store(true)
		var okHits, badHits atomic.Int64
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { okHits.Add(1) }))
		t.Cleanup(ok.Close)
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			badHits.Add(1)
			if failing.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
			}
		}))
		t.Cleanup(bad.Close)
		srv := e2e.Start(t, fmt.Sprintf(`
admin_token: %q
admin_listen: "127.0.0.1:0"
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: [%q]
    max_attempts: 1
    targets:
      - {name: billing, forward: %q}
      - {name: deploy, forward: %q, circuit_after: -1}
`, token, rightSecret, ok.URL, bad.URL), dbURL, nil)
		ev := srv.Send("shop", "ord-1", []byte(`{"type":"order.paid"}`)).ID
		srv.WaitIdle(30 * time.Second)

		c := browser(t)
		csrf := login(t, c, srv.Admin)
		_, page := fetch(t, c, "GET", srv.Admin+"/ui/events/"+strconv.FormatInt(ev, 10), nil)
		for _, want := range []string{"Deliveries", "billing", "deploy", `status dead`, `status done`} {
			if !strings.Contains(page, want) {
				t.Errorf("event page lacks %q", want)
			}
		}
		var dead hookbox.Event
		for _, d := range srv.Events("shop") {
			if d.Target == "deploy" {
				dead = d
			}
		}
		if dead.Status != hookbox.StatusDead {
			t.Fatalf("the deploy delivery is %+v, want dead", dead)
		}
		_, page = fetch(t, c, "GET", srv.Admin+"/ui/events/"+strconv.FormatInt(dead.ID, 10), nil)
		if !strings.Contains(page, fmt.Sprintf(`href="/ui/events/%d"`, ev)) || !strings.Contains(page, "to target deploy") {
			t.Errorf("a delivery's page does not link to its event")
		}
		failing.Store(false)
		resp, _ := fetch(t, c, "POST", srv.Admin+"/ui/events/"+strconv.FormatInt(dead.ID, 10)+"/replay", url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("replay of the delivery: %d", resp.StatusCode)
		}
		srv.Svc.Pool.Notify()
		srv.WaitIdle(30 * time.Second)
		if okHits.Load() != 1 || badHits.Load() != 2 {
			t.Errorf("billing got %d requests, deploy %d; want 1 and 2 (the replay reached deploy alone)", okHits.Load(), badHits.Load())
		}
		if e, err := srv.Svc.Store.Event(t.Context(), ev); err != nil || e.Status != hookbox.StatusDone {
			t.Errorf("the event after the replay: %+v, %v", e.Status, err)
		}
	})
}
