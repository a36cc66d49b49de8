package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/ui"
)

// eventForm returns what submitting the Replay form of event id's page
// posts: its hidden inputs, the CSRF token among them.
func eventForm(t *testing.T, page string, id int64) url.Values {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`(?s)<form method="post" action="/ui/events/%d/replay"[^>]*>(.*?)</form>`, id))
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no replay form for event %d:\n%s", id, page)
	}
	form := url.Values{}
	for _, in := range hiddenInputRE.FindAllStringSubmatch(m[1], -1) {
		form.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	return form
}

// startConsole serves the console over st and returns its address and a
// logged-in client.
func startConsole(t *testing.T, st dbtest.Store) (string, *http.Client) {
	t.Helper()
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar", "fo"}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := browser(t)
	login(t, c, hs.URL)
	return hs.URL, c
}

// TestConsoleReplayFormTwiceRunsOnce: the Replay form of a done event's
// page, submitted twice (a double click, or the page left open while the
// first replay ran), replays the event once. The form carries the attempts
// the page showed (if_attempts); the first post replays the event, the
// worker runs it, and the second post is refused with 409 "changed since
// you looked", the event done after one more attempt. Before, the second
// post replayed it again.
func TestConsoleReplayFormTwiceRunsOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		id := storetest.Seed(t, st, hookbox.StatusDone, time.Now(), "", storetest.Delivery("polar", "msg_1"))[0]
		base, c := startConsole(t, st)
		_, page := fetch(t, c, "GET", fmt.Sprintf("%s/ui/events/%d", base, id), nil)
		form := eventForm(t, page, id)
		seen, err := st.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if form.Get("include_done") != "1" || form.Get("if_attempts") != fmt.Sprint(seen.Attempts) {
			t.Fatalf("the done event's replay form posts %v; want include_done=1 and if_attempts=%d", form, seen.Attempts)
		}
		action := fmt.Sprintf("%s/ui/events/%d/replay", base, id)
		if resp, page := fetch(t, c, "POST", action, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("first post: %d\n%s", resp.StatusCode, page)
		}
		// The worker runs the replayed event.
		evs, err := st.Claim(context.Background(), hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{"polar"}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %+v, %v", evs, err)
		}
		now := time.Now()
		if _, err := st.Finish(context.Background(), []hookbox.Outcome{{ID: id, Owner: "w", Attempt: evs[0].Attempts,
			Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
		resp, page := fetch(t, c, "POST", action, form)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "changed since you looked") {
			t.Errorf("second post of the same form: %d; want 409 changed since you looked\n%s", resp.StatusCode, page)
		}
		after, err := st.Event(context.Background(), id)
		if err != nil || after.Status != hookbox.StatusDone || after.Attempts != seen.Attempts+1 {
			t.Errorf("after two posts of the form: %+v, %v; want done after one more attempt (%d)", after, err, seen.Attempts+1)
		}
	})
}

// TestConsoleReplayFanOutSaysWhichDelivery: the Replay form of a FanOut
// event's page (pending: its delivery to a waits, to b is done, to c is
// dead) replays a and c and says, on the page it answers with, that the
// delivery to b was left alone because it is done. The same form posted
// again once a is in flight answers 409 saying that a is being worked and
// that the event changed since the page was read. Before, the first
// redirected to "Replayed: the event is pending again" and nothing said b
// was left out.
func TestConsoleReplayFanOutSaysWhichDelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		rs, err := st.Ingest(ctx, []hookbox.Delivery{{Source: "fo", DeliveryID: "1", Header: http.Header{"Content-Type": {"application/json"}},
			Payload: []byte(`{}`), ReceivedAt: time.Now(), FanOut: true,
			Routes: []hookbox.Route{{Target: "a"}, {Target: "b"}, {Target: "c"}}}})
		if err != nil {
			t.Fatal(err)
		}
		parent := rs[0].ID
		claim := func(q string) hookbox.Event {
			evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: "w-" + q, Limit: 1, Lease: time.Minute, Sources: []string{q}})
			if err != nil || len(evs) != 1 {
				t.Fatalf("claim %s: %+v, %v", q, evs, err)
			}
			return evs[0]
		}
		b, c := claim("fo/b"), claim("fo/c")
		now := time.Now()
		if _, err := st.Finish(ctx, []hookbox.Outcome{
			{ID: b.ID, Owner: b.LeaseOwner, Attempt: b.Attempts, Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now},
			{ID: c.ID, Owner: c.LeaseOwner, Attempt: c.Attempts, Status: hookbox.StatusDead, StartedAt: now, FinishedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
		base, cl := startConsole(t, st)
		_, page := fetch(t, cl, "GET", fmt.Sprintf("%s/ui/events/%d", base, parent), nil)
		form := eventForm(t, page, parent)
		if form.Get("if_attempts") != "2" || form.Has("include_done") {
			t.Errorf("the pending FanOut event's form posts %v; want if_attempts 2 (one attempt each at b and c), no include_done", form)
		}
		action := fmt.Sprintf("%s/ui/events/%d/replay", base, parent)
		resp, page := fetch(t, cl, "POST", action, form)
		want := fmt.Sprintf("Delivery %d of event %d (target b) is done; replay it from its own page to run it again", b.ID, parent)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("replay of the FanOut event: %d; want 200 saying %q\n%s", resp.StatusCode, want, page)
		}
		if e, err := st.Event(ctx, c.ID); err != nil || e.Status != hookbox.StatusPending {
			t.Errorf("delivery to c after the replay: %+v, %v; want pending", e, err)
		}

		a := claim("fo/a")
		resp, page = fetch(t, cl, "POST", action, form)
		for _, want := range []string{
			fmt.Sprintf("delivery %d of event %d (target a) is being worked right now", a.ID, parent),
			fmt.Sprintf("delivery %d of event %d (target c) was not replayed: event %d changed since you looked", c.ID, parent, parent),
		} {
			if resp.StatusCode != http.StatusConflict || !strings.Contains(page, want) {
				t.Errorf("the form again, a in flight: %d; want 409 saying %q\n%s", resp.StatusCode, want, page)
			}
		}
	})
}

// TestConsoleShowsAHeldKey: the page of a delivery waiting behind a dead
// one of its order key shows the key and links the dead delivery, with
// both ways out; the console showed no order key at all, so a held key
// read as a pending delivery with no reason.
func TestConsoleShowsAHeldKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ids := storetest.SeedHeldKey(t, st, "fo", "app", "cust-9", "forward: 410 Gone", "k1", "k2")
		base, c := startConsole(t, st)
		_, page := fetch(t, c, "GET", fmt.Sprintf("%s/ui/events/%d", base, ids[1]), nil)
		for _, want := range []string{"Order key", "cust-9", fmt.Sprintf(`<a href="/ui/events/%d">dead delivery %d</a>`, ids[0], ids[0]),
			fmt.Sprintf("hookbox events skip %d", ids[0])} {
			if !strings.Contains(page, want) {
				t.Errorf("the waiting delivery's page lacks %q", want)
			}
		}
		if _, page := fetch(t, c, "GET", fmt.Sprintf("%s/ui/events/%d", base, ids[0]), nil); strings.Contains(page, "Waits behind") {
			t.Error("the dead delivery's own page says it waits")
		}
	})
}
