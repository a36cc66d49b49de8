package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// TestAdminSkip: POST /admin/events/{id}/skip ends one dead delivery that
// holds its order key, records the reason, wakes the workers, and the
// key's next delivery can be claimed; a pending delivery is 409, a
// missing id 404, an unstorable reason 400, a second skip 200 with
// already. Before it, GET of the waiting delivery names it (held_by),
// and GET /admin/events?key= lists the key's deliveries.
func TestAdminSkip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		ids := storetest.SeedHeldKey(t, h.st, "shop", "app", "cust-7", "forward: 410 Gone", "o1", "o2")
		// The waiting delivery says what holds it; the listing filters by key.
		var d server.EventDetail
		h.json("GET", fmt.Sprintf("/admin/events/%d", ids[1]), 200, &d)
		if d.HeldBy != ids[0] || d.Event.OrderKey != "cust-7" {
			t.Fatalf("GET the waiting delivery: held_by %d, order_key %q; want %d, cust-7", d.HeldBy, d.Event.OrderKey, ids[0])
		}
		// A reason longer than MaxSkipReason is refused, not kept whole
		// in the last error and the attempts row.
		if code, body := h.call("POST", fmt.Sprintf("/admin/events/%d/skip?reason=%s", ids[0], strings.Repeat("x", server.MaxSkipReason+1))); code != 400 ||
			!strings.Contains(string(body), "at most") {
			t.Errorf("skip with a reason of %d bytes = %d %s, want 400", server.MaxSkipReason+1, code, body)
		}
		var listed []hookbox.Event
		h.json("GET", "/admin/events?key=cust-7", 200, &listed)
		if len(listed) != 2 || listed[0].ID != ids[1] || listed[1].ID != ids[0] {
			t.Fatalf("GET /admin/events?key=cust-7 = %+v", listed)
		}
		if code, b := h.call("POST", fmt.Sprintf("/admin/events/%d/skip", ids[1])); code != 409 || !strings.Contains(string(b), "only a dead delivery") {
			t.Fatalf("skip of a pending delivery = %d %s, want 409", code, b)
		}
		if code, _ := h.call("POST", "/admin/events/424242/skip"); code != 404 {
			t.Fatalf("skip of a missing id = %d, want 404", code)
		}
		if code, _ := h.call("POST", fmt.Sprintf("/admin/events/%d/skip?reason=%%00", ids[0])); code != 400 {
			t.Fatalf("skip with a NUL in the reason = %d, want 400", code)
		}
		var res hookbox.SkipResult
		h.json("POST", fmt.Sprintf("/admin/events/%d/skip?reason=customer+deleted", ids[0]), 200, &res)
		if res.ID != ids[0] || res.Released != "cust-7" || res.Already {
			t.Fatalf("skip = %+v", res)
		}
		if h.notified.Load() != 1 {
			t.Errorf("workers not woken after the skip")
		}
		e, err := h.st.Event(context.Background(), ids[0])
		if err != nil || e.Status != hookbox.StatusDead || !strings.Contains(e.LastError, "skipped by an operator (admin API): customer deleted") {
			t.Fatalf("after the skip: %+v, %v", e, err)
		}
		evs, err := h.st.Claim(context.Background(), hookbox.ClaimParams{Owner: "as-1", Limit: 5, Lease: time.Minute,
			Sources: []string{"shop/app"}, ByKey: true})
		if err != nil || len(evs) != 1 || evs[0].ID != ids[1] {
			t.Fatalf("claim after the skip = %v, %v; want the waiting delivery", evs, err)
		}
		h.json("POST", fmt.Sprintf("/admin/events/%d/skip", ids[0]), 200, &res)
		if !res.Already || h.notified.Load() != 1 {
			t.Fatalf("second skip = %+v (notified %d)", res, h.notified.Load())
		}
	})
}
