package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestAdminRefusesUnknownAndEmptyParams: the admin API's actions ignored
// a query parameter they do not take, and a bulk replay read an empty
// filter value as no filter, each answered 200 after an action for real
// or over more than was asked: a purge with the CLI's spelling dry-run
// deleted events; dry_run on the replay of one event, or on a skip, was
// no preview; a replay with a misspelled source (event_source), or with
// source= or status= empty (a script's variable that came out empty),
// replayed every source's events, or done ones; and one resuming with
// after_id= empty all of them again (found by a second review). Each is now refused
// (400), and nothing changes.
func TestAdminRefusesUnknownAndEmptyParams(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		now := time.Now()
		dead := seed(t, h.st, "github", "push", hookbox.StatusDead, now, "g1")[0]
		done := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, now, "d1")[0]
		old := seed(t, h.st, "a", "t", hookbox.StatusDone, now.Add(-10*24*time.Hour), "1")[0]
		seed(t, h.st, "a", "t", hookbox.StatusDone, now, "2") // the newest row, which SQLite keeps
		held := storetest.SeedHeldKey(t, h.st, "shop", "app", "cust-7", "forward: 410 Gone", "o1", "o2")[0]
		for _, c := range []struct{ path, want string }{
			{"/admin/purge?days=7&dry-run=true", `unknown parameter \"dry-run\"`},
			{fmt.Sprintf("/admin/events/%d/replay?dry_run=true", dead), `unknown parameter \"dry_run\"`},
			{fmt.Sprintf("/admin/events/%d/skip?dry_run=true", held), `unknown parameter \"dry_run\"`},
			{"/admin/replay?status=dead&event_source=polar", `unknown parameter \"event_source\"`},
			{"/admin/replay?status=dead&source=", "source: given empty"},
			{"/admin/replay?source=polar&status=&include_done=true", "status: given empty"},
			{"/admin/replay?status=dead&after_id=", "after_id: given empty"},
			{"/admin/targets/shop/app/resume?reason=x", `unknown parameter \"reason\"`},
		} {
			code, b := h.call("POST", c.path)
			if code != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
				t.Errorf("POST %s = %d %s, want 400 saying %s", c.path, code, b, c.want)
			}
		}
		for id, want := range map[int64]hookbox.Status{dead: hookbox.StatusDead, done: hookbox.StatusDone, old: hookbox.StatusDone, held: hookbox.StatusDead} {
			if st := h.status(id); st != want {
				t.Errorf("event %d is %s after the refused calls, want %s", id, st, want)
			}
		}
		if e, err := h.st.Event(t.Context(), held); err != nil || strings.HasPrefix(e.LastError, hookbox.SkipPrefix) {
			t.Errorf("the held delivery after a refused skip: %q, %v", e.LastError, err)
		}
		if code, b := h.call("GET", "/admin/events?source=polar&limit=5"); code != http.StatusOK {
			t.Errorf("a listing with the parameters it takes: %d %s", code, b)
		}
	})
}
