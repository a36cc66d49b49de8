package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/ui"
)

// TestConsoleBulkReplayStoppedPartWay: a bulk replay confirmed in the
// console whose second slice fails (the stores replay 1000 events a
// transaction; here the database refuses the slice's first event) shows
// how many events the first slice replayed (those now pending), that the
// rest are still dead and that replaying them again is safe, with a form
// that counts the dead events left; that count finds exactly the rest.
// Before, the page was a bare "replay failed; see the server log.", as
// if nothing had been replayed.
func TestConsoleBulkReplayStoppedPartWay(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	var ds []hookbox.Delivery
	for i := range 1500 {
		ds = append(ds, storetest.Delivery("polar", fmt.Sprint("msg_", i)))
	}
	ids := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down", ds...)
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := browser(t)
	login(t, c, hs.URL)

	_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?source=polar", nil)
	_, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
	confirm := replayForm(t, page, "dry run")
	lift := dbtest.Refuse(t, dbURL, "UPDATE OF status", "events", ids[1000])
	resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", confirm)
	lift()
	pending, err := st.Events(context.Background(), hookbox.Filter{Source: "polar", Status: hookbox.StatusPending, Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The replay stopped part-way", fmt.Sprintf("%d events were replayed before it stopped", len(pending)),
		"were not replayed and are still dead", "Replaying them again is safe"} {
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(page, want) || len(pending) != 1000 {
			t.Errorf("confirm: %d, %d pending; the page lacks %q:\n%s", resp.StatusCode, len(pending), want, page)
		}
	}
	resp, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "stopped replay"))
	if want := fmt.Sprintf("%d events would be replayed", len(ids)-len(pending)); resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
		t.Errorf("counting the rest: %d, the page lacks %q:\n%s", resp.StatusCode, want, page)
	}
}

// TestConsoleStoppedReplayGoesOnAtItsPace: a bulk replay that stopped
// part-way and is then gone on with from its page (the count of the dead
// events left, then its confirmation) paces the events it had not
// reached after those it had: every replayed event falls due in id
// order, as one replay's, so a source worked in id order keeps it. Before,
// the console replayed them afresh, due at once, before the last
// thousand-odd events the stopped replay had paced into the coming ten
// seconds.
func TestConsoleStoppedReplayGoesOnAtItsPace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		table, change := "events", "UPDATE OF status"
		if !strings.HasPrefix(dbURL, "sqlite:") {
			table, change = "queue", "UPDATE" // PostgreSQL keeps an event's status in its queue row
		}
		st := dbtest.Open(t, dbURL)
		var ds []hookbox.Delivery
		for i := range 1500 {
			ds = append(ds, storetest.Delivery("strict", fmt.Sprint("msg_", i)))
		}
		ids := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down", ds...)
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"strict"}})
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		c := browser(t)
		login(t, c, hs.URL)

		_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?source=strict", nil)
		_, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
		confirm := replayForm(t, page, "dry run")
		lift := dbtest.Refuse(t, dbURL, change, table, ids[1000]) // the first event of the second slice
		resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", confirm)
		lift()
		if resp.StatusCode == http.StatusOK || !strings.Contains(page, "The replay stopped part-way") {
			t.Fatalf("confirm: %d, want the replay stopped part-way:\n%s", resp.StatusCode, page)
		}
		resp, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "stopped replay"))
		if want := fmt.Sprintf("%d events would be replayed", len(ids)-1000); resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("counting the rest: %d, the page lacks %q:\n%s", resp.StatusCode, want, page)
		}
		resp, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "count of the rest"))
		if want := fmt.Sprintf("Replayed %d events", len(ids)-1000); resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("going on: %d, the page lacks %q:\n%s", resp.StatusCode, want, page)
		}
		var last time.Time
		for i, id := range ids {
			e, err := st.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != hookbox.StatusPending || e.NextAttemptAt.Before(last) {
				t.Fatalf("event %d (the %dth): %s, due %v, before the one before it (%v): the replay that went on started its pace again",
					id, i, e.Status, e.NextAttemptAt, last)
			}
			last = e.NextAttemptAt
		}
	})
}

// TestConsoleReplayResumeChecked: the resume point a bulk replay's form
// carries (after_id, pace_after) is checked: a value that is no count
// from 0 is refused with a 400 naming it, and nothing is replayed.
func TestConsoleReplayResumeChecked(t *testing.T) {
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	ids := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down", storetest.Delivery("polar", "msg_1"))
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := browser(t)
	login(t, c, hs.URL)
	_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?source=polar", nil)
	form := replayForm(t, page, "dead page")
	for _, bad := range [][2]string{{"after_id", "-1"}, {"after_id", "x"}, {"pace_after", "-1"}, {"pace_after", "1e3"}} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Del("dry_run")
		f.Set(bad[0], bad[1])
		resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", f)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, bad[0]) {
			t.Errorf("%s=%s: %d, want a 400 naming it:\n%s", bad[0], bad[1], resp.StatusCode, page)
		}
	}
	if e, err := st.Event(context.Background(), ids[0]); err != nil || e.Status != hookbox.StatusDead {
		t.Errorf("after the refused forms: %s, %v; want it still dead", e.Status, err)
	}
}
