package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/storetest"
)

// skipFormRE finds the Skip form of a page; its submatches are the event
// id of its action and its body.
var orderKeyRE = regexp.MustCompile(`<dt>Order key</dt><dd class="id">([^<]*)</dd>`)

var skipFormRE = regexp.MustCompile(`(?s)<form method="post" action="/ui/events/(\d+)/skip"[^>]*>(.*?)</form>`)

// skipForm returns what submitting the Skip form of event id's page posts
// (its hidden inputs, the CSRF token among them, and reason), or nil when
// the page has none.
func skipForm(t *testing.T, page string, id int64, reason string) url.Values {
	t.Helper()
	m := skipFormRE.FindStringSubmatch(page)
	if m == nil {
		return nil
	}
	if m[1] != fmt.Sprint(id) {
		t.Fatalf("the page of event %d has a Skip form for event %s", id, m[1])
	}
	form := url.Values{}
	for _, in := range hiddenInputRE.FindAllStringSubmatch(m[2], -1) {
		form.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	if !strings.Contains(m[2], `<input type="text" name="reason" required`) {
		t.Errorf("the Skip form of event %d asks for no reason:\n%s", id, m[2])
	}
	if want := fmt.Sprintf(`<button type="submit">Skip delivery %d</button>`, id); !strings.Contains(m[2], want) {
		t.Errorf("the Skip form of event %d lacks %q:\n%s", id, want, m[2])
	}
	form.Set("reason", reason)
	return form
}

// TestConsoleSkipFormOnlyWhereItHelps: the page of a dead delivery that
// is the first of an order key it shares with a waiting delivery offers a
// Skip form with a reason, the CSRF token and its attempts (if_attempts);
// the waiting delivery, the event of several targets, a dead delivery
// without an order key, and the dead delivery once skipped offer none
// (the CLI and the admin API refuse the first two; the others hold up
// nothing). Before, no page had a Skip form.
func TestConsoleSkipFormOnlyWhereItHelps(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		ids := storetest.SeedHeldKey(t, st, "fo", "app", "cust-9", "forward: 410 Gone", "k1", "k2")
		unkeyed := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "forward: 500", storetest.Delivery("polar", "plain"))[0]
		head, err := st.Event(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		base, c := startConsole(t, st)
		page := func(id int64) string {
			t.Helper()
			resp, page := fetch(t, c, "GET", fmt.Sprintf("%s/ui/events/%d", base, id), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET event %d: %d", id, resp.StatusCode)
			}
			return page
		}
		form := skipForm(t, page(ids[0]), ids[0], "x")
		if form == nil {
			t.Fatalf("the page of dead delivery %d, the first of key cust-9, offers no Skip form", ids[0])
		}
		if form.Get("csrf") == "" || form.Get("if_attempts") != fmt.Sprint(head.Attempts) {
			t.Errorf("the Skip form posts %v; want a csrf token and if_attempts=%d", form, head.Attempts)
		}
		for what, id := range map[string]int64{"the waiting delivery": ids[1], "the event of several targets": head.Parent,
			"a dead delivery without an order key": unkeyed} {
			if skipForm(t, page(id), id, "x") != nil {
				t.Errorf("the page of %s (%d) offers a Skip form", what, id)
			}
		}
		if _, err := st.Skip(ctx, hookbox.SkipParams{ID: ids[0], Reason: "by the test", Via: "test", Key: routing.NoValueKey}); err != nil {
			t.Fatal(err)
		}
		if skipForm(t, page(ids[0]), ids[0], "x") != nil {
			t.Errorf("the page of delivery %d offers a Skip form once it was skipped", ids[0])
		}
	})
}

// heldKey is a running hookbox whose target app (order_by data.customer)
// refuses evt_1 for good (410): its delivery first is dead and holds its
// order key, a value the sender chose with markup and a bidi override in
// it, and the key's next delivery, second (evt_2), waits. delivered counts
// what the app accepted.
type heldKey struct {
	srv           *e2e.Server
	first, second hookbox.Event
	delivered     *atomic.Int32
}

func startHeldKey(t *testing.T, dbURL string) *heldKey {
	t.Helper()
	h := &heldKey{delivered: &atomic.Int32{}}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"id":"evt_1"`) {
			http.Error(w, "the customer is gone", http.StatusGone)
			return
		}
		h.delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	h.srv = e2e.Start(t, fmt.Sprintf(`
admin_token: %q
admin_listen: "127.0.0.1:0"
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: [%q]
    max_attempts: 1
    targets:
      - name: app
        forward: %s
        order_by: data.customer
`, token, "whsec_c2tpcC10ZXN0LXNlY3JldC1vZi10aGUtY29uc29sZQ==", sink.URL), dbURL, nil)
	key := "cust-" + hostile + "\u202e"
	body := func(id string) []byte {
		b, err := json.Marshal(map[string]any{"id": id, "type": "order.paid", "data": map[string]string{"customer": key}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	h.srv.Send("shop", "evt_1", body("evt_1"))
	h.first = h.delivery(t, "evt_1", isDead(1))
	h.srv.Send("shop", "evt_2", body("evt_2"))
	h.second = h.delivery(t, "evt_2", func(e hookbox.Event) bool { return e.Status == hookbox.StatusPending })
	if h.first.OrderKey == "" || h.first.OrderKey != h.second.OrderKey {
		t.Fatalf("order keys %q and %q; want one key", h.first.OrderKey, h.second.OrderKey)
	}
	return h
}

// delivery waits for the delivery of the event id to meet cond and
// returns it.
func (h *heldKey) delivery(t *testing.T, id string, cond func(hookbox.Event) bool) hookbox.Event {
	t.Helper()
	var ev hookbox.Event
	await(t, "delivery of "+id, func() bool {
		evs, err := h.srv.Svc.Store.Events(context.Background(), hookbox.Filter{Source: hookbox.QueueName("shop", "app"), DeliveryID: id})
		if err != nil || len(evs) != 1 {
			return false
		}
		ev = evs[0]
		return cond(ev)
	})
	return ev
}

func isDead(attempts int) func(hookbox.Event) bool {
	return func(e hookbox.Event) bool { return e.Status == hookbox.StatusDead && e.Attempts == attempts }
}

func isDone(e hookbox.Event) bool { return e.Status == hookbox.StatusDone }

// TestConsoleSkipReleasesTheKey: with a real worker, a delivery the app
// refuses for good (410) dies and holds its order key, a value the sender
// chose with markup and a bidi override in it; the next delivery of the
// key waits. On the dead delivery's page (the key shown escaped, the
// button's words fixed): a post of the Skip form without the CSRF token is
// refused (403); after the delivery was replayed and died again, the form
// of the page as first read is refused as changed since you looked (409),
// and nothing is written; a post without a reason is refused (400); the
// form of the page read again skips it: the page says so, the delivery
// stays dead with a skip attempt carrying the reason, and the worker
// delivers the key's next delivery. The same form again changes nothing.
// Before, the page had no Skip form and the post was a 404.
func TestConsoleSkipReleasesTheKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startHeldKey(t, dbURL)
		srv, first, second := h.srv, h.first, h.second
		ctx := context.Background()
		st := srv.Svc.Store
		delivery := func(id string, cond func(hookbox.Event) bool) hookbox.Event {
			t.Helper()
			return h.delivery(t, id, cond)
		}

		c := browser(t)
		login(t, c, srv.Admin)
		eventPage := fmt.Sprintf("%s/ui/events/%d", srv.Admin, first.ID)
		_, page := fetch(t, c, "GET", eventPage, nil)
		mustNotContainMarkup(t, page, "the dead delivery's page")
		// The payload is shown as received; the key is shown escaped.
		if m := orderKeyRE.FindStringSubmatch(page); m == nil || strings.Contains(m[1], "\u202e") || !strings.Contains(m[1], `\u202e`) {
			t.Errorf("the dead delivery's order key is shown as %q; want its bidi override escaped", m)
		}
		stale := skipForm(t, page, first.ID, "customer deleted")
		if stale == nil {
			t.Fatalf("the page of dead delivery %d, holding its key, offers no Skip form:\n%s", first.ID, page)
		}
		action := eventPage + "/skip"
		unchanged := func(when string, want hookbox.Event) {
			t.Helper()
			e, err := st.Event(ctx, first.ID)
			if err != nil || e.Status != hookbox.StatusDead || e.LastError != want.LastError || e.OrderKey != want.OrderKey {
				t.Errorf("%s: the delivery is %+v, %v; want it left dead as it was (%q)", when, e, err, want.LastError)
			}
			at, err := st.Attempts(ctx, first.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range at {
				if a.Outcome == hookbox.AttemptSkip {
					t.Errorf("%s: a skip attempt was written: %+v", when, a)
				}
			}
		}

		noCSRF := url.Values{"reason": {"customer deleted"}, "if_attempts": stale["if_attempts"]}
		if resp, page := fetch(t, c, "POST", action, noCSRF); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a post without the CSRF token: %d; want 403\n%s", resp.StatusCode, page)
		}
		unchanged("after a post without the CSRF token", first)

		// Someone replays it meanwhile; it runs again and dies again.
		if res, err := st.Replay(ctx, hookbox.ReplayParams{IDs: []int64{first.ID}}); err != nil || len(res.Replayed) != 1 {
			t.Fatalf("replay: %+v, %v", res, err)
		}
		srv.Svc.Pool.Notify()
		again := delivery("evt_1", isDead(2))
		resp, page := fetch(t, c, "POST", action, stale)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "changed since you looked") {
			t.Errorf("the form of the page read before the replay: %d; want 409 changed since you looked\n%s", resp.StatusCode, page)
		}
		unchanged("after the stale form", again)

		_, page = fetch(t, c, "GET", eventPage, nil)
		form := skipForm(t, page, first.ID, "customer deleted")
		if form == nil || form.Get("if_attempts") != "2" {
			t.Fatalf("the page read again: Skip form %v; want if_attempts=2", form)
		}
		blank := url.Values{"csrf": form["csrf"], "if_attempts": form["if_attempts"], "reason": {"  "}}
		if resp, page := fetch(t, c, "POST", action, blank); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Give a reason") {
			t.Errorf("a post without a reason: %d; want 400\n%s", resp.StatusCode, page)
		}
		unchanged("after a post without a reason", again)
		if e, err := st.Event(ctx, second.ID); err != nil || e.Status != hookbox.StatusPending {
			t.Errorf("the waiting delivery before the skip: %+v, %v; want pending", e, err)
		}

		resp, _ = fetch(t, c, "POST", action, form)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != fmt.Sprintf("/ui/events/%d?done=skipped", first.ID) {
			t.Fatalf("the Skip form: %d to %q; want 303 to the page with done=skipped", resp.StatusCode, loc)
		}
		_, page = fetch(t, c, "GET", srv.Admin+resp.Header.Get("Location"), nil)
		if !strings.Contains(page, "Skipped: the delivery stays dead") || skipFormRE.MatchString(page) {
			t.Errorf("the page after the skip does not say it was skipped, or offers the form again:\n%s", page)
		}
		mustNotContainMarkup(t, page, "the page after the skip")
		done := delivery("evt_2", isDone)
		if done.ID != second.ID || h.delivered.Load() != 1 {
			t.Errorf("the key's next delivery: %d done, the app got %d deliveries; want %d, 1", done.ID, h.delivered.Load(), second.ID)
		}
		e, err := st.Event(ctx, first.ID)
		want := "skipped by an operator (console): customer deleted"
		if err != nil || e.Status != hookbox.StatusDead || !strings.Contains(e.LastError, want) {
			t.Errorf("the skipped delivery: %+v, %v; want dead, its last error saying %q", e, err, want)
		}
		at, err := st.Attempts(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		var skips int
		for _, a := range at {
			if a.Outcome == hookbox.AttemptSkip {
				skips++
				if a.Attempt != 2 || !strings.Contains(a.Error, want) {
					t.Errorf("the skip attempt: %+v; want attempt 2 saying %q", a, want)
				}
			}
		}
		if skips != 1 {
			t.Errorf("%d skip attempts; want 1: %+v", skips, at)
		}

		resp, _ = fetch(t, c, "POST", action, form)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != fmt.Sprintf("/ui/events/%d?done=skip-already", first.ID) {
			t.Errorf("the same form again: %d to %q; want 303 with done=skip-already", resp.StatusCode, loc)
		}
	})
}

// diesBeforeSkip is a real store in which the delivery dies again just
// before each Skip: it is replayed, run and dead again (storetest.DieAgain)
// between the console's handling of the form and the store's skip, as
// another operator's replay and a worker would.
type diesBeforeSkip struct {
	dbtest.Store
	t *testing.T
}

func (s diesBeforeSkip) Skip(ctx context.Context, p hookbox.SkipParams) (hookbox.SkipResult, error) {
	storetest.DieAgain(s.t, s.Store, p.ID, "forward: 410 Gone, again")
	return s.Store.Skip(ctx, p)
}

// TestConsoleSkipChecksInTheSkip: the Skip form's attempts (if_attempts)
// are compared by the store's skip itself, in its transaction: when the
// delivery is replayed and dies again just before the skip, after
// anything the console could read, the form is refused as changed since
// you looked (409) and nothing is written. Before, the console compared
// them on a read of its own before the skip, and this skip ended the new
// death, which the operator never saw.
func TestConsoleSkipChecksInTheSkip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		ids := storetest.SeedHeldKey(t, st, "fo", "app", "cust-4", "forward: 410 Gone", "r1", "r2")
		base, c := startConsole(t, diesBeforeSkip{Store: st, t: t})
		eventPage := fmt.Sprintf("%s/ui/events/%d", base, ids[0])
		_, page := fetch(t, c, "GET", eventPage, nil)
		form := skipForm(t, page, ids[0], "customer deleted")
		if form == nil {
			t.Fatalf("the page of dead delivery %d offers no Skip form:\n%s", ids[0], page)
		}
		resp, page := fetch(t, c, "POST", eventPage+"/skip", form)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "changed since you looked") {
			t.Fatalf("the form of a delivery that died again just before the skip: %d; want 409 changed since you looked\n%s", resp.StatusCode, page)
		}
		e, err := st.Event(ctx, ids[0])
		if err != nil || e.Status != hookbox.StatusDead || e.Attempts != 2 || strings.HasPrefix(e.LastError, hookbox.SkipPrefix) || e.OrderKey != "cust-4" {
			t.Errorf("after the refused skip: %+v, %v; want dead after 2 attempts, not skipped, key cust-4", e, err)
		}
		at, err := st.Attempts(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range at {
			if a.Outcome == hookbox.AttemptSkip {
				t.Errorf("the refused skip wrote an attempts row: %+v", a)
			}
		}
	})
}
