package ui_test

import (
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

// TestConsoleBulkReplaySaysPace: the console's bulk replay says how it
// paces a replay larger than hookbox.DefaultReplayRate (the first of them
// due now, the rest at that pace), and that a small one is due now.
func TestConsoleBulkReplaySaysPace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		var many []hookbox.Delivery
		for i := range hookbox.DefaultReplayRate + 1 {
			many = append(many, storetest.Delivery("big", fmt.Sprint("b", i)))
		}
		storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down", many...)
		storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "the app is down",
			storetest.Delivery("small", "s1"), storetest.Delivery("small", "s2"))
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"big", "small"}})
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		c := browser(t)
		login(t, c, hs.URL)
		for _, want := range []struct{ source, says string }{
			{"big", fmt.Sprintf("Replayed %d events: they are pending again,\nthe first %d due now and the rest %d a second after them",
				hookbox.DefaultReplayRate+1, hookbox.DefaultReplayRate, hookbox.DefaultReplayRate)},
			{"small", "Replayed 2 events: they are pending again,\ndue now."},
		} {
			_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?source="+want.source, nil)
			_, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
			resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dry run"))
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, want.says) {
				t.Errorf("replay of %s: %d\n%s\nwant it to say %q", want.source, resp.StatusCode, page, want.says)
			}
		}
	})
}
