package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/server"
)

// stoppedReply is the body of a bulk replay that failed part-way.
type stoppedReply struct {
	Error         string  `json:"error"`
	Stopped       bool    `json:"stopped"`
	Replayed      []int64 `json:"replayed"`
	ReplayedCount int     `json:"replayed_count"`
	ResumeAfterID *int64  `json:"resume_after_id"`
	// ResumePaceAfter, with pace_after, paces the rest after those.
	ResumePaceAfter int    `json:"resume_pace_after"`
	Rerun           string `json:"rerun"`
}

// TestAdminReplayStoppedPartWay: a bulk replay whose second slice fails
// (the stores replay 1000 events a transaction) answers 503 when the
// database went away (PostgreSQL behind a faults.Proxy cut while the
// slice waits for a row lock the test holds) and 500 when the database
// refused the slice (SQLite, a trigger), each time with the events the
// first slice replayed (exactly those now pending, and counted), that
// the rest were not, where to go on (after_id) and that running it again
// is safe for the work but, a dead-only replay paced past its first
// second, not for the order. Going on with after_id replays the rest. Before, both were a
// bare error: how many were replayed, and which, was lost.
func TestAdminReplayStoppedPartWay(t *testing.T) {
	const path = "/admin/replay?source=cut&status=dead"
	// check reads the stopped replay's answer; after is an admin API on
	// the same database that reads it and goes on.
	check := func(t *testing.T, h, after *adminHarness, ids []int64, code int, body []byte, wantCode int) {
		t.Helper()
		var rep stoppedReply
		if err := json.Unmarshal(body, &rep); err != nil || code != wantCode {
			t.Fatalf("POST %s = %d %s (%v), want %d with what was replayed", path, code, body, err, wantCode)
		}
		const done = 1000
		var pending []int64
		for _, e := range listEvents(t, after, hookbox.Filter{Source: "cut", Status: hookbox.StatusPending}) {
			pending = append(pending, e.ID)
		}
		slices.Sort(pending)
		if !rep.Stopped || rep.ReplayedCount != done || !slices.Equal(rep.Replayed, ids[:done]) || !slices.Equal(pending, rep.Replayed) {
			t.Errorf("stopped %v, replayed_count %d, %d ids in replayed; %d pending in the store; want %d, the first slice, in each",
				rep.Stopped, rep.ReplayedCount, len(rep.Replayed), len(pending), done)
		}
		resume := fmt.Sprintf("after_id=%d&pace_after=%d", ids[done-1], done)
		if rep.ResumeAfterID == nil || *rep.ResumeAfterID != ids[done-1] || rep.ResumePaceAfter != done || !strings.Contains(rep.Rerun, resume) ||
			!strings.Contains(rep.Rerun, "safe") || !strings.Contains(rep.Error, "the rest were not replayed") {
			t.Errorf("resume_after_id %v, error %q, rerun %q: want %d, the rest not replayed, %s and that running it again is safe",
				rep.ResumeAfterID, rep.Error, rep.Rerun, ids[done-1], resume)
		}
		if strings.Contains(rep.Rerun, "safe too") || !strings.Contains(rep.Rerun, "out of order") {
			// Its thousand events are paced over ten seconds and, pending
			// now, a dead-only run would not pace them again.
			t.Errorf("rerun %q offers the replay again as it was, its pace started afresh", rep.Rerun)
		}
		if h.notified.Load() == 0 {
			t.Error("the workers were not woken for the events replayed")
		}
		code, body = after.call("POST", path+"&"+resume)
		var rest stoppedReply
		if err := json.Unmarshal(body, &rest); err != nil || code != http.StatusOK || rest.Stopped || !slices.Equal(rest.Replayed, ids[done:]) {
			t.Errorf("going on with %s = %d, %d replayed (%v); want 200 with the %d left", resume, code, len(rest.Replayed), err, len(ids)-done)
		}
		// Paced as one replay: none of the rest is due before one the
		// stopped replay paced.
		due := map[int64]time.Time{}
		for _, e := range listEvents(t, after, hookbox.Filter{Source: "cut", Status: hookbox.StatusPending}) {
			due[e.ID] = e.NextAttemptAt
		}
		for i := 1; i < len(ids); i++ {
			if due[ids[i]].Before(due[ids[i-1]]) {
				t.Fatalf("event %d (the %dth) is due at %v, before %d at %v: the replay that went on started its pace again",
					ids[i], i, due[ids[i]], ids[i-1], due[ids[i-1]])
			}
		}
	}
	seedCut := func(t *testing.T, h *adminHarness) []int64 {
		names := make([]string, 1500)
		for i := range names {
			names[i] = fmt.Sprint("c", i)
		}
		ids := seed(t, h.st, "cut", "x", hookbox.StatusDead, time.Now(), names...)
		slices.Sort(ids)
		return ids
	}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbURL := pgtest.URL(t)
		proxy, viaProxy := faults.URLProxyFor(t, dbURL)
		h := startAdmin(t, viaProxy, adminToken)
		ids := seedCut(t, h)
		// Hold the queue row of the first event of the second slice: the
		// slice waits for it, after the first slice committed.
		r := postCutWhenBlocked(t, dbURL, proxy, h.url+path, `SELECT pg_backend_pid() FROM queue WHERE id = $1 FOR UPDATE`, ids[1000], "replay")
		// Read and go on through a store of its own: the pool of the
		// first still holds connections the cut closed.
		check(t, h, startAdmin(t, dbURL, adminToken), ids, r.code, r.body, http.StatusServiceUnavailable)
	})

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.SQLiteURL(t)
		h := startAdmin(t, dbURL, adminToken)
		ids := seedCut(t, h)
		lift := dbtest.Refuse(t, dbURL, "UPDATE OF status", "events", ids[1000]) // the database refuses the second slice's first event
		code, body := h.call("POST", path)
		lift()
		check(t, h, h, ids, code, body, http.StatusInternalServerError)
	})
}

// TestAdminReplayAfterIDChecked: after_id is a positive id; anything else
// is a 400 that replays nothing.
func TestAdminReplayAfterIDChecked(t *testing.T) {
	h := startAdmin(t, dbtest.SQLiteURL(t), adminToken)
	ids := seed(t, h.st, "aft", "x", hookbox.StatusDead, time.Now(), "1")
	for _, v := range []string{"0", "-3", "x", "1.5"} {
		if code, body := h.call("POST", "/admin/replay?source=aft&after_id="+v); code != http.StatusBadRequest || !strings.Contains(string(body), "after_id") {
			t.Errorf("after_id=%s: %d %s, want a 400 naming after_id", v, code, body)
		}
	}
	if n := len(listEvents(t, h, hookbox.Filter{Source: "aft", Status: hookbox.StatusDead})); n != len(ids) {
		t.Errorf("%d of %d events still dead after refused replays", n, len(ids))
	}
}

// reply is an HTTP answer read in another goroutine.
type reply struct {
	code       int
	body       []byte
	retryAfter string // the Retry-After header
	err        error
}

// post makes an admin POST with the token, for a goroutine (no t.Fatal).
func post(url string) reply {
	req, err := http.NewRequest("POST", url, nil)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: b, retryAfter: resp.Header.Get("Retry-After"), err: err}
}

// pgConn connects to dbURL directly, closed when the test ends.
func pgConn(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// listEvents lists the events f selects, every one of them.
func listEvents(t *testing.T, h *adminHarness, f hookbox.Filter) []hookbox.Event {
	t.Helper()
	f.Limit = 1 << 30
	evs, err := h.st.Events(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestStopReplayWords: what a stopped replay's reply says for each way it
// can stop: nothing replayed (run it again), part-way (go on with
// after_id; running it again is unsafe with include_done, since the
// events it replayed that finished since would run again), and failed
// after every slice committed (nothing is left).
func TestStopReplayWords(t *testing.T) {
	at := func(id int64) *int64 { return &id }
	dead := hookbox.Filter{Status: hookbox.StatusDead}
	for _, c := range []struct {
		name      string
		p         hookbox.ReplayParams
		res       hookbox.ReplayResult
		err, want string
		resume    bool
	}{
		{"nothing", hookbox.ReplayParams{Filter: dead}, hookbox.ReplayResult{ResumeAfter: at(0)},
			"nothing was replayed", "Run the same replay again.", true},
		{"part-way", hookbox.ReplayParams{Filter: dead}, hookbox.ReplayResult{Replayed: []int64{4, 5}, ResumeAfter: at(9)},
			"the 2 events in replayed were replayed before it stopped and stay replayed; the rest were not replayed", "after_id=9", true},
		{"part-way, dead only", hookbox.ReplayParams{Filter: dead}, hookbox.ReplayResult{Replayed: []int64{4}, ResumeAfter: at(9)},
			"the 1 event in replayed was replayed", "safe too: it takes only events still dead", true},
		{"part-way, dead only, paced past its first second", hookbox.ReplayParams{Filter: dead},
			hookbox.ReplayResult{Replayed: []int64{4}, ResumeAfter: at(9), PacedCount: hookbox.DefaultReplayRate + 1},
			"the 1 event in replayed was replayed", "after_id=9&pace_after=101 to go on", true},
		{"part-way, done too", hookbox.ReplayParams{Filter: dead, IncludeDone: true}, hookbox.ReplayResult{Replayed: []int64{4}, ResumeAfter: at(9)},
			"the rest was not replayed", "Do not run it again as it was", true},
		{"after the slices", hookbox.ReplayParams{IDs: []int64{4}}, hookbox.ReplayResult{Replayed: []int64{4}},
			"each of the 1 event in replayed was replayed", "Nothing is left to replay", false},
	} {
		st := server.StopReplay(c.p, c.res, "why", "after_id=%d", "&pace_after=%d")
		if !st.Stopped || st.ReplayedCount != len(c.res.Replayed) || !strings.Contains(st.Error, c.err) ||
			!strings.Contains(st.Rerun, c.want) || (st.ResumeAfterID != nil) != c.resume {
			t.Errorf("%s: %+v; want %q in error, %q in rerun, resume_after_id %v", c.name, st, c.err, c.want, c.resume)
		}
		// Run again as it was, a dead-only replay whose pace ran past its
		// first second makes the events it did not reach due before the
		// last it paced: the rerun does not call that safe.
		if paced := c.p.ReplayWait(c.res.PacedCount-1) > 0; paced && (strings.Contains(st.Rerun, "safe too") ||
			!strings.Contains(st.Rerun, "out of order")) {
			t.Errorf("%s: rerun %q offers the replay as it was, its pace started again", c.name, st.Rerun)
		}
	}
}

// postCutWhenBlocked posts to url while a transaction of its own holds
// the row lock takes (a "SELECT pg_backend_pid() FROM … WHERE id = $1
// FOR UPDATE" of row id on dbURL), waits until the request's statement
// waits for that lock (after the batches before it committed), then cuts
// proxy, the server's way to the database, and returns the reply. what
// names the operation in a failure.
func postCutWhenBlocked(t *testing.T, dbURL string, proxy *faults.Proxy, url, lock string, id int64, what string) reply {
	t.Helper()
	ctx := context.Background()
	holder, watcher := pgConn(t, dbURL), pgConn(t, dbURL)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var pid int
	if err := tx.QueryRow(ctx, lock, id).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	replied := make(chan reply, 1)
	go func() { replied <- post(url) }()
	for waiting := false; !waiting; {
		select {
		case r := <-replied:
			t.Fatalf("the %s answered %d %s before it waited for the held row", what, r.code, r.body)
		case <-time.After(5 * time.Millisecond):
		}
		if err := watcher.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Cut() // the database goes away mid-batch
	r := <-replied
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The waiting batch can only roll back now: its connection is gone.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}
