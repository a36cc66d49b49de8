package service

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// heldKeysConfig has three targets of one source, each forwarding to an
// app that fails every delivery, after one attempt: one ordered whose dead
// deliveries hold their keys (held), one ordered under on_dead: skip
// (passing), one unordered (plain).
const heldKeysConfig = `
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: ["whsec_` + opsPolarKey + `"]
    max_attempts: 1
    targets:
      - {name: held, forward: "%[1]s", order_by: customer}
      - {name: passing, forward: "%[1]s", order_by: customer, on_dead: skip}
      - {name: plain, forward: "%[1]s"}
`

// TestKeysHeldMetric: /metrics shows hookbox_target_keys_held for each
// ordered target whose dead deliveries hold their keys: 1 once a dead
// delivery holds a key that a later delivery waits on. An
// on_dead: skip target and an unordered one have no series, and no order
// key appears in the output.
func TestKeysHeldMetric(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(app.Close)
	const key = "cust-secretish-42"
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, fmt.Sprintf(heldKeysConfig, app.URL), nil)
		body := func(id string) string {
			return fmt.Sprintf(`{"type":"order.paid","id":%q,"customer":%q}`, id, key)
		}
		if code := h.send("shop", "d1", body("d1"), nil); code != http.StatusAccepted {
			t.Fatalf("d1: %d", code)
		}
		for _, q := range []string{"shop/held", "shop/passing", "shop/plain"} {
			h.waitStatus(h.idOf(q, "d1"), hookbox.StatusDead) // max_attempts 1
		}
		if code := h.send("shop", "d2", body("d2"), nil); code != http.StatusAccepted {
			t.Fatalf("d2: %d", code)
		}
		// d2 waits behind the dead d1 in shop/held; elsewhere it runs.
		for _, q := range []string{"shop/passing", "shop/plain"} {
			h.waitStatus(h.idOf(q, "d2"), hookbox.StatusDead)
		}
		if e := h.event(h.idOf("shop/held", "d2")); e.Status != hookbox.StatusPending {
			t.Fatalf("d2 of shop/held is %s, want pending behind the dead d1", e.Status)
		}

		got := scrapeMetrics(t, h.url)
		if v, ok := got[`hookbox_target_keys_held{target="shop/held"}`]; !ok || v != 1 {
			t.Errorf(`hookbox_target_keys_held{target="shop/held"} = %v (present: %v), want 1`, v, ok)
		}
		for series := range got {
			if strings.Contains(series, key) {
				t.Errorf("an order key in a series: %s", series)
			}
			if strings.HasPrefix(series, "hookbox_target_keys_held{") && series != `hookbox_target_keys_held{target="shop/held"}` {
				t.Errorf("series %s: only ordered targets under on_dead: hold have one", series)
			}
		}
	})
}
