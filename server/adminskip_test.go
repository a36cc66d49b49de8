package server_test

import (
	"context"
	"fmt"
	"os"
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

// TestAdminSkipIfAttempts: POST /admin/events/{id}/skip?if_attempts=N
// skips the delivery only while its attempts are still N, as the caller
// saw them. After it was replayed and died again, the count seen before
// is refused (409, changed since you looked) and nothing is written: no
// last error, no skip row, the workers not woken; the count it has now
// skips it. A malformed if_attempts (a word, a negative number, empty)
// is a 400 that skips nothing. Before, if_attempts was ignored and the
// stale skip ended a death the caller never saw.
func TestAdminSkipIfAttempts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		ctx := context.Background()
		ids := storetest.SeedHeldKey(t, h.st, "shop", "app", "cust-8", "forward: 410 Gone", "i1", "i2")
		seen, err := h.st.Event(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		skip := fmt.Sprintf("/admin/events/%d/skip?reason=gone&if_attempts=", ids[0])
		for _, bad := range []string{"x", "-1", "", "1.5"} {
			if code, b := h.call("POST", skip+bad); code != 400 || !strings.Contains(string(b), "if_attempts") {
				t.Errorf("skip with if_attempts=%q = %d %s, want 400", bad, code, b)
			}
		}
		storetest.DieAgain(t, h.st, ids[0], "forward: 410 Gone, again")
		now, err := h.st.Event(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		code, b := h.call("POST", skip+fmt.Sprint(seen.Attempts))
		if code != 409 || !strings.Contains(string(b), "changed since you looked") {
			t.Fatalf("skip with the attempts seen before the replay = %d %s, want 409 changed since you looked", code, b)
		}
		e, err := h.st.Event(ctx, ids[0])
		if err != nil || e.LastError != now.LastError || e.OrderKey != "cust-8" || h.notified.Load() != 0 {
			t.Fatalf("after the refused skip: %+v, %v (notified %d); want it as it was", e, err, h.notified.Load())
		}
		at, err := h.st.Attempts(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range at {
			if a.Outcome == hookbox.AttemptSkip {
				t.Fatalf("the refused skip wrote an attempts row: %+v", a)
			}
		}
		var res hookbox.SkipResult
		h.json("POST", skip+fmt.Sprint(now.Attempts), 200, &res)
		if res.ID != ids[0] || res.Released != "cust-8" || res.Already || h.notified.Load() != 1 {
			t.Fatalf("skip with the attempts it has = %+v (notified %d)", res, h.notified.Load())
		}
	})
}

// TestSkipReasonInCharacters: the console's reason field takes up to 500
// characters (its maxlength, which a browser counts in characters), and
// the server took up to 500 bytes: a reason of 200 Japanese characters
// (600 bytes) passed the form and was refused with a 400. The bound is
// in characters now, the same in both places, and the check says so.
func TestSkipReasonInCharacters(t *testing.T) {
	if err := server.CheckSkipReason("reason", strings.Repeat("日", server.MaxSkipReason)); err != nil {
		t.Errorf("a reason of %d characters (%d bytes): %v; want it taken", server.MaxSkipReason, 3*server.MaxSkipReason, err)
	}
	err := server.CheckSkipReason("reason", strings.Repeat("x", server.MaxSkipReason+1))
	if err == nil || !strings.Contains(err.Error(), "at most 500 characters, not 501") {
		t.Errorf("a reason of %d characters: %v; want it refused in characters", server.MaxSkipReason+1, err)
	}
	page, err := os.ReadFile("../ui/templates/event.html")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`name="reason" required maxlength="%d"`, server.MaxSkipReason); !strings.Contains(string(page), want) {
		t.Errorf("the console's reason field lacks %s: the form and the server must agree", want)
	}
}
