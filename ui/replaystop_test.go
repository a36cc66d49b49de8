package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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
