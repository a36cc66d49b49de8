package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestListingRefusesRepeatedParams: a listing (and a bulk replay) given
// one of its parameters more than once is answered 400 naming it, not
// with the first value read: a client appending before_id to the last
// page's address would otherwise get that page again forever, and a bulk
// replay given "status=&status=dead" would replay every status.
func TestListingRefusesRepeatedParams(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		ids := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, time.Now(), "d1", "d2", "d3")
		var page []hookbox.Event
		h.json("GET", "/admin/events?limit=1", 200, &page)
		if len(page) != 1 || page[0].ID != ids[2] {
			t.Fatalf("first page = %+v", page)
		}
		for _, c := range []struct{ method, path, param string }{
			{"GET", "/admin/events?limit=1&before_id=3&before_id=2", "before_id"},
			{"GET", "/admin/events?limit=1&limit=5", "limit"},
			{"GET", "/admin/events?status=done&status=dead", "status"},
			{"GET", "/admin/events?source=polar&source=", "source"},
			{"GET", "/admin/events?since=1h&since=2h", "since"},
			{"GET", "/admin/rejected?before_id=3&before_id=2", "before_id"},
			{"GET", "/admin/rejected?status=401&status=404", "status"},
			{"POST", "/admin/replay?source=polar&status=&status=dead&include_done=true", "status"},
		} {
			code, b := h.call(c.method, c.path)
			if code != 400 || !strings.Contains(string(b), c.param+": given 2 times") {
				t.Errorf("%s %s = %d %s, want 400 naming %s", c.method, c.path, code, b, c.param)
			}
		}
		for _, id := range ids {
			if st := h.status(id); st != hookbox.StatusDone {
				t.Errorf("event %d is %s after the refused replay, want done", id, st)
			}
		}
	})
}

// TestListingRefusesTimeAtZero: since or until at the first instant of
// year 1 (or before it), which a filter reads as no bound, is refused
// with 400: until=0001-01-01T00:00:00Z listed every event instead of
// none.
func TestListingRefusesTimeAtZero(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, time.Now(), "d1")
		for _, p := range []string{"/admin/events?until=0001-01-01T00:00:00Z", "/admin/events?until=0001-01-01",
			"/admin/events?since=0000-06-01T00:00:00Z", "/admin/rejected?since=0001-01-01T00:00:00Z"} {
			if code, b := h.call("GET", p); code != 400 || !strings.Contains(string(b), "want a time after") {
				t.Errorf("GET %s = %d %s, want 400", p, code, b)
			}
		}
		var evs []hookbox.Event
		h.json("GET", "/admin/events?until=0001-01-01T00:00:00.001Z", 200, &evs)
		if len(evs) != 0 {
			t.Errorf("until the first millisecond of year 1 lists %d events, want none", len(evs))
		}
	})
}
