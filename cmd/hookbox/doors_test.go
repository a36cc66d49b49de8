package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/ui"
)

// TestListingDoorsAgree: the same filter, walked page by page to its end,
// lists the same events in the same order through the three doors: the
// CLI (events list --json, --before-id), the admin API (GET /admin/events,
// before_id) and the console (/ui/events, following its next-page link).
func TestListingDoorsAgree(t *testing.T) {
	const token = "doors-admin-token-0123456789abcdef"
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		now := time.Now()
		var ids []string
		for i := range 7 {
			ids = append(ids, fmt.Sprint("d", i))
		}
		cliSeed(t, st, "polar", "order.paid", hookbox.StatusDone, now, ids...)
		cliSeed(t, st, "github", "push", hookbox.StatusDead, now, "g1", "g2", "g3", "g4", "g5")
		cliSeed(t, st, "polar", "order.refunded", hookbox.StatusDead, now, "r1", "r2")
		cliSeed(t, st, "polar", "order.paid", hookbox.StatusPending, now, "p1", "p2", "p3", "p4")
		srv := server.New(server.Config{})
		server.RegisterAdmin(srv, server.AdminConfig{Token: token, Store: st})
		ui.Register(srv, ui.Config{Token: token, Store: st})
		ts := httptest.NewServer(srv)
		defer ts.Close()
		get := func(path string) []byte {
			t.Helper()
			req, err := http.NewRequest("GET", ts.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d %s, %v", path, resp.StatusCode, b, err)
			}
			return b
		}
		row := regexp.MustCompile(`<td class="num"><a href="/ui/events/(\d+)">`)
		next := regexp.MustCompile(`<a rel="next" href="([^"]+)"`)
		for _, filter := range []url.Values{{}, {"status": {"dead"}}, {"source": {"polar"}},
			{"source": {"polar"}, "status": {"pending"}}, {"type": {"order.paid"}}, {"status": {"done"}, "since": {"1h"}}} {
			var cli, api, console []int64
			args := []string{"--limit", "3"}
			for k, v := range filter {
				args = append(args, "--"+k, v[0])
			}
			for page := listIDs(t, dbURL, args...); ; page = listIDs(t, dbURL, append(args, "--before-id", strconv.FormatInt(cli[len(cli)-1], 10))...) {
				cli = append(cli, page...)
				if len(page) < 3 {
					break
				}
			}
			q := url.Values{"limit": {"3"}}
			for k, v := range filter {
				q[k] = v
			}
			for {
				var page []hookbox.Event
				if err := json.Unmarshal(get("/admin/events?"+q.Encode()), &page); err != nil {
					t.Fatal(err)
				}
				for _, e := range page {
					api = append(api, e.ID)
				}
				if len(page) < 3 {
					break
				}
				q.Set("before_id", strconv.FormatInt(page[len(page)-1].ID, 10))
			}
			q.Del("before_id")
			for path, pages := "/ui/events?"+q.Encode(), 0; path != ""; pages++ {
				if pages > 20 {
					t.Fatalf("console %v: no last page", filter)
				}
				b := get(path)
				for _, m := range row.FindAllSubmatch(b, -1) {
					id, _ := strconv.ParseInt(string(m[1]), 10, 64)
					console = append(console, id)
				}
				path = ""
				if m := next.FindSubmatch(b); m != nil {
					path = "/ui/events" + html.UnescapeString(string(m[1]))
				}
			}
			if len(cli) == 0 || !slices.Equal(cli, api) || !slices.Equal(cli, console) {
				t.Errorf("filter %v: CLI %v, API %v, console %v; want the same events, some", filter, cli, api, console)
			}
		}
	})
}
