package server_test

import (
	"context"
	"strconv"
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

// TestActionsRefuseRepeatedParams: a bulk replay, a purge or the replay
// of one event given one of its own parameters more than once is
// answered 400 naming it, and changes nothing: read by its first value,
// "dry_run=false&dry_run=true" (a client appending dry_run=true to
// preview) replayed every dead event, and purged every old one, for
// good.
func TestActionsRefuseRepeatedParams(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		old := time.Now().Add(-72 * time.Hour)
		dead := seed(t, h.st, "polar", "order.paid", hookbox.StatusDead, old, "x1", "x2")
		done := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, old, "d1", "d2")
		for _, c := range []struct{ path, param string }{
			{"/admin/replay?status=dead&dry_run=false&dry_run=true", "dry_run"},
			{"/admin/replay?status=dead&include_done=false&include_done=true", "include_done"},
			{"/admin/replay?status=dead&after_id=1&after_id=0", "after_id"},
			{"/admin/replay?status=dead&rate=1&rate=1", "rate"},
			{"/admin/replay?status=dead&pace_after=1&pace_after=1", "pace_after"},
			{"/admin/purge?days=1&dry_run=false&dry_run=true", "dry_run"},
			{"/admin/purge?days=1&days=100", "days"},
			{"/admin/purge?days=1&dry_run=true&include_dead=false&include_dead=true", "include_dead"},
			{"/admin/events/" + strconv.FormatInt(dead[0], 10) + "/replay?include_done=false&include_done=true", "include_done"},
			{"/admin/events/" + strconv.FormatInt(dead[0], 10) + "/replay?if_attempts=0&if_attempts=1", "if_attempts"},
			{"/admin/events/" + strconv.FormatInt(dead[0], 10) + "/skip?if_attempts=0&if_attempts=1", "if_attempts"},
			{"/admin/events/" + strconv.FormatInt(dead[0], 10) + "/skip?reason=a&reason=b", "reason"},
		} {
			code, b := h.call("POST", c.path)
			if code != 400 || !strings.Contains(string(b), c.param+": given 2 times") {
				t.Errorf("POST %s = %d %s, want 400 naming %s", c.path, code, b, c.param)
			}
		}
		for _, id := range dead {
			if st := h.status(id); st != hookbox.StatusDead {
				t.Errorf("event %d is %s after the refused replays, want dead", id, st)
			}
		}
		for _, id := range done {
			if _, err := h.st.Event(context.Background(), id); err != nil {
				t.Errorf("event %d after the refused purges: %v, want it kept", id, err)
			}
		}
	})
}
