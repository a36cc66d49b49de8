package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
)

// stoppedPurge is the body of a purge that failed part-way.
type stoppedPurge struct {
	Error        string `json:"error"`
	Stopped      bool   `json:"stopped"`
	Done         int    `json:"done"`
	DeletedCount int    `json:"deleted_count"`
	Rerun        string `json:"rerun"`
}

// TestAdminPurgeStoppedPartWay: a purge whose second batch fails answers
// 503 with Retry-After when the database went away (PostgreSQL behind a
// faults.Proxy cut while the batch waits for a row lock the test holds)
// and 500 when the database refused the batch (SQLite, a trigger), each
// time with the count the first batch deleted, which is exactly how many
// events are gone, that the rest were not deleted, and that running it
// again is safe. Running it again deletes the rest. Before, both were a
// bare error: how many were deleted was lost.
func TestAdminPurgeStoppedPartWay(t *testing.T) {
	const path = "/admin/purge?days=30"
	// seedOld stores n done events first changed 40 days ago, then m 35
	// days ago: the second batch, on either store, starts in the second
	// group (the purges walk the oldest first).
	seedOld := func(t *testing.T, h *adminHarness, first, then int) (older, newer []int64) {
		names := func(prefix string, n int) []string {
			s := make([]string, n)
			for i := range s {
				s[i] = fmt.Sprint(prefix, i)
			}
			return s
		}
		older = seed(t, h.st, "cut", "x", hookbox.StatusDone, time.Now().Add(-40*24*time.Hour), names("a", first)...)
		newer = seed(t, h.st, "cut", "x", hookbox.StatusDone, time.Now().Add(-35*24*time.Hour), names("b", then)...)
		return older, newer
	}
	// check reads the stopped purge's answer; after is an admin API on the
	// same database that counts what is left and runs the purge again.
	check := func(t *testing.T, after *adminHarness, total int, resp reply, wantCode int) {
		t.Helper()
		var rep stoppedPurge
		if err := json.Unmarshal(resp.body, &rep); err != nil || resp.code != wantCode {
			t.Fatalf("POST %s = %d %s (%v), want %d with what was deleted", path, resp.code, resp.body, err, wantCode)
		}
		left := len(listEvents(t, after, hookbox.Filter{Source: "cut"}))
		if !rep.Stopped || rep.DeletedCount == 0 || rep.DeletedCount != total-left || rep.Done != rep.DeletedCount {
			t.Errorf("stopped %v, deleted_count %d, done %d; %d of %d events gone from the store; want the count of those gone, more than none",
				rep.Stopped, rep.DeletedCount, rep.Done, total-left, total)
		}
		if !strings.Contains(rep.Error, "the rest were not deleted") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("error %q, rerun %q: want that the rest were not deleted and that running it again is safe", rep.Error, rep.Rerun)
		}
		if wantCode == http.StatusServiceUnavailable && resp.retryAfter == "" {
			t.Error("a 503 without Retry-After")
		}
		var again stoppedPurge
		after.json("POST", path, http.StatusOK, &again)
		if again.Stopped || again.Done != left && again.Done != left-1 { // SQLite keeps the newest event
			t.Errorf("running it again: stopped %v, deleted %d, want the %d left", again.Stopped, again.Done, left)
		}
	}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbURL := pgtest.URL(t)
		proxy, viaProxy := faults.URLProxyFor(t, dbURL)
		h := startAdmin(t, viaProxy, adminToken)
		older, newer := seedOld(t, h, 1000, 300) // PostgreSQL deletes 1000 a batch
		r := postCutWhenBlocked(t, dbURL, proxy, h.url+path, `SELECT pg_backend_pid() FROM queue WHERE id = $1 FOR UPDATE`, newer[0], "purge")
		check(t, startAdmin(t, dbURL, adminToken), len(older)+len(newer), r, http.StatusServiceUnavailable)
	})

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.SQLiteURL(t)
		h := startAdmin(t, dbURL, adminToken)
		older, newer := seedOld(t, h, 250, 100)                       // SQLite deletes 250 a batch
		lift := dbtest.Refuse(t, dbURL, "DELETE", "events", newer[0]) // the database refuses the second batch
		r := post(h.url + path)
		if r.err != nil {
			t.Fatal(r.err)
		}
		lift()
		check(t, h, len(older)+len(newer), r, http.StatusInternalServerError)
	})
}

// TestStopPurgeAndRecheckWords: what a stopped purge's and re-check's
// replies say when nothing was done yet (nothing deleted or admitted) and
// when one thing was (in the singular), each with that running it again is
// safe.
func TestStopPurgeAndRecheckWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{server.StopPurge(hookbox.PurgeResult{}, "why").Error, "purge failed (why): nothing was deleted"},
		{server.StopPurge(hookbox.PurgeResult{Stored: 1}, "why").Error, "the 1 event counted here was deleted before it stopped and stays deleted; the rest was not deleted"},
		{server.StopRecheck(rejected.RecheckResult{}, "why").Error, "re-check failed (why): nothing was admitted"},
		{server.StopRecheck(rejected.RecheckResult{Admitted: []rejected.Admission{{RejectionID: 1}}}, "why").Error,
			"the 1 delivery in admitted was stored before it stopped and stays stored"},
		{server.StopPurge(hookbox.PurgeResult{}, "why").Rerun, "safe"},
		{server.StopRecheck(rejected.RecheckResult{}, "why").Rerun, "safe"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%q lacks %q", c.got, c.want)
		}
	}
}
