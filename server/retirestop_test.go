package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/server"
)

// stoppedRetire is the body of a retire that failed part-way.
type stoppedRetire struct {
	Name       string `json:"name"`
	Ended      int    `json:"ended"`
	Error      string `json:"error"`
	Stopped    bool   `json:"stopped"`
	EndedCount int    `json:"ended_count"`
	Rerun      string `json:"rerun"`
}

// TestAdminRetireStoppedPartWay: a retire ends a removed target's
// deliveries in slices of 1000, each its own transaction. When the second
// slice fails (the database refuses it: a trigger, on either store), the
// answer is an error status with how many the first slice ended, which is
// exactly how many are dead, that the rest were not ended, and that
// running it again is safe; running it again ends the rest. Before, it
// was a bare 503 or 500: how many were ended was lost, though a thousand
// deliveries had gone dead.
func TestAdminRetireStoppedPartWay(t *testing.T) {
	const path = "/admin/targets/gone/retire"
	// table is where the store keeps a delivery's status.
	run := func(t *testing.T, dbURL, table string, wantCode int) {
		h := startAdmin(t, dbURL, adminToken)
		names := make([]string, 1300)
		for i := range names {
			names[i] = fmt.Sprint("d", i)
		}
		ids := seed(t, h.st, "gone", "x", hookbox.StatusPending, time.Now().Add(-time.Hour), names...)
		lift := dbtest.Refuse(t, dbURL, "UPDATE", table, ids[1000]) // the first of the second slice
		r := post(h.url + path)
		lift()
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep stoppedRetire
		if err := json.Unmarshal(r.body, &rep); err != nil || r.code != wantCode {
			t.Fatalf("POST %s = %d %s (%v), want %d with what was ended", path, r.code, r.body, err, wantCode)
		}
		dead := len(listEvents(t, h, hookbox.Filter{Source: "gone", Status: hookbox.StatusDead}))
		if !rep.Stopped || rep.EndedCount != 1000 || rep.Ended != dead || rep.EndedCount != dead {
			t.Errorf("stopped %v, ended %d, ended_count %d; %d dead in the store; want the 1000 of the first slice, counted alike",
				rep.Stopped, rep.Ended, rep.EndedCount, dead)
		}
		if !strings.Contains(rep.Error, "stopped part-way") || !strings.Contains(rep.Error, "the rest were not ended") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("error %q, rerun %q: want that it stopped part-way, the rest were not ended, and running it again is safe", rep.Error, rep.Rerun)
		}
		if wantCode == http.StatusServiceUnavailable && r.retryAfter == "" {
			t.Error("a 503 without Retry-After")
		}
		var again stoppedRetire
		h.json("POST", path, http.StatusOK, &again)
		if again.Stopped || again.Ended != 300 {
			t.Errorf("running it again: stopped %v, ended %d, want the 300 left", again.Stopped, again.Ended)
		}
	}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		run(t, pgtest.URL(t), "queue", http.StatusServiceUnavailable)
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		run(t, dbtest.SQLiteURL(t), "events", http.StatusInternalServerError)
	})
}

// TestStopRetireWords: what a stopped retire's reply says when nothing was
// ended yet and when one delivery was (in the singular).
func TestStopRetireWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{server.StopRetire(hookbox.RetireResult{}, "why").Error, "retire failed (why): nothing was ended"},
		{server.StopRetire(hookbox.RetireResult{Ended: 1}, "why").Error,
			"the 1 delivery counted in ended was ended as dead before it stopped and stays ended as dead; the rest was not ended"},
		{server.StopRetire(hookbox.RetireResult{}, "why").Rerun, "safe"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%q lacks %q", c.got, c.want)
		}
	}
}
