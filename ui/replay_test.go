package ui_test

import (
	"context"
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

var (
	replayFormRE  = regexp.MustCompile(`(?s)<form method="post" action="/ui/replay"[^>]*>(.*?)</form>`)
	hiddenInputRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
	deadFiltersRE = regexp.MustCompile(`(?s)<form method="get" action="/ui/dead" class="filters">(.*?)</form>`)
	fieldNameRE   = regexp.MustCompile(`<(?:input|select) name="([^"]*)"`)
)

// replayForm returns what submitting the page's bulk replay form posts:
// its hidden inputs, the CSRF token among them.
func replayForm(t *testing.T, page, where string) url.Values {
	t.Helper()
	m := replayFormRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("%s: no replay form:\n%s", where, page)
	}
	form := url.Values{}
	for _, in := range hiddenInputRE.FindAllStringSubmatch(m[1], -1) {
		form.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	return form
}

// TestConsoleBulkReplayKeepsFilter proves that a bulk replay started from
// the dead events page replays what the page's filter selected and no
// more: with two dead events and the page filtered by one's delivery id,
// the dry run counts 1, and confirming it (posting the forms the pages
// render, CSRF token included) replays that event alone while the other
// stays dead. It also proves that every field of the dead page's filter
// form, when set, reaches the replay form, so a filter added to the form
// later cannot be dropped by the replay.
func TestConsoleBulkReplayKeepsFilter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ids := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down",
			storetest.Delivery("polar", "msg_one"), storetest.Delivery("polar", "msg_other"))
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		c := browser(t)
		login(t, c, hs.URL)

		_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?delivery_id=msg_one", nil)
		resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("dry run: %d\n%s", resp.StatusCode, page)
		}
		if !strings.Contains(page, "1 events would be replayed: dead events with delivery_id msg_one") {
			t.Errorf("the dry run does not count the one filtered event:\n%s", page)
		}
		resp, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dry run"))
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Replayed 1 events") {
			t.Errorf("confirm: %d\n%s", resp.StatusCode, page)
		}
		for i, want := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusDead} {
			ev, err := st.Event(context.Background(), ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if ev.Status != want {
				t.Errorf("event %s after the replay: %s, want %s", ev.DeliveryID, ev.Status, want)
			}
		}

		// Every filter field set: each is carried to the replay.
		_, page = fetch(t, c, "GET", hs.URL+"/ui/dead", nil)
		m := deadFiltersRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no filter form on the dead page:\n%s", page)
		}
		q := url.Values{}
		for _, f := range fieldNameRE.FindAllStringSubmatch(m[1], -1) {
			q.Set(f[1], "1d") // a valid text, since and until alike
		}
		_, page = fetch(t, c, "GET", hs.URL+"/ui/dead?"+q.Encode(), nil)
		form := replayForm(t, page, "dead page with every filter")
		for k := range q {
			if form.Get(k) != "1d" {
				t.Errorf("the replay form drops the dead page's filter %q", k)
			}
		}
		if _, ok := q["delivery_id"]; !ok {
			t.Errorf("the dead page's filter form has no delivery_id field: %v", q)
		}
	})
}

// TestDeadPageFilterByKeyShown: the dead events page filtered by an order
// key (a link /ui/dead?key=K, as an operator may be sent one) shows the key
// in its filter form, and the bulk replay's count says it with what does
// not print escaped (printable.Escape), as every other page shows a key.
// The page read the key and its replay carried it, but the form had no
// field for it, so the page looked unfiltered while it listed one key's
// deliveries; and a bidi override in the count's words reordered them.
func TestDeadPageFilterByKeyShown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		c := browser(t)
		login(t, c, hs.URL)

		key := "cus_\u202eevil"
		_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?"+url.Values{"key": {key}}.Encode(), nil)
		m := deadFiltersRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no filter form on the dead page:\n%s", page)
		}
		if !strings.Contains(m[1], `name="key" value="`+key+`"`) {
			t.Errorf("the dead page filtered by key %q does not show it in its filter form:\n%s", key, m[1])
		}
		resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("dry run: %d\n%s", resp.StatusCode, page)
		}
		_, count, _ := strings.Cut(page, "would be replayed:")
		count, _, _ = strings.Cut(count, "\n")
		if strings.Contains(count, "\u202e") || !strings.Contains(count, `dead events with key cus_\u202eevil`) {
			t.Errorf("the count does not show the key escaped: %q", count)
		}
	})
}
