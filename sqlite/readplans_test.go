package sqlite

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/slowcount"
	"github.com/hookbox/hookbox/storetest"
)

// readsFixture is a store whose oldest events are the dead and
// unfinished ones, below many done ones: source a's 5 dead and 4
// pending; source b's FanOut events with targets t1 and t2, 3 of whose
// deliveries ended dead, 2 run now (processing) and 1 has none (stored);
// then 400 done events of a.
func readsFixture(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	s := openTemp(t)
	var ds []hookbox.Delivery
	for i := range 9 {
		ds = append(ds, storetest.Delivery("a", fmt.Sprint("old", i)))
	}
	for i := range 6 {
		d := storetest.Delivery("b", fmt.Sprint("fan", i))
		d.FanOut = true
		d.Routes = []hookbox.Route{{Target: "t1"}, {Target: "t2"}}
		if i == 5 {
			d.Routes = nil
		}
		ds = append(ds, d)
	}
	for i := range 400 {
		ds = append(ds, storetest.Delivery("a", fmt.Sprint("done", i)))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE events SET status = 'done' WHERE source = 'a' AND delivery_id LIKE 'done%'`,
		`UPDATE events SET status = 'dead', attempts = 3 WHERE source = 'a' AND delivery_id IN ('old0', 'old2', 'old4', 'old6', 'old8')`,
		`UPDATE events SET status = 'done' WHERE source LIKE 'b/%'`,
		`UPDATE events SET status = 'dead', attempts = 3 WHERE source = 'b/t2' AND delivery_id IN ('fan0', 'fan1', 'fan3')`,
		`UPDATE events SET status = 'processing', lease_owner = 'x' WHERE source = 'b/t1' AND delivery_id IN ('fan2', 'fan4')`,
	} {
		if _, err := s.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestStatusListingReadsNoFinishedRows: the events listing filtered by a
// status an event leaves (pending, processing, dead: the console's dead
// page, hookbox events list --status, /admin/events?status=,
// effect.Uncertain), and by stored, finds its events through the
// partial index of the status (events_due, events_dead, events_fanout).
// It walked down the ids checking each event's status, every done event
// above the dead ones; and with a source, it read every event of the
// source through the (source, delivery_id) index and sorted them
// (seconds, for a page of one source's dead events at three million).
// It lists what the walk listed, newest first, page by page too: the
// events and deliveries in the status, and the FanOut events whose
// deliveries read so.
func TestStatusListingReadsNoFinishedRows(t *testing.T) {
	ctx := context.Background()
	s := readsFixture(t)
	for _, c := range []struct {
		f    hookbox.Filter
		want int
	}{
		{hookbox.Filter{Status: hookbox.StatusDead, Limit: 50}, 5 + 3 + 3},
		{hookbox.Filter{Status: hookbox.StatusDead, Limit: 4}, 4},
		{hookbox.Filter{Status: hookbox.StatusDead, EventType: "test.event", Limit: 50}, 5 + 3 + 3},
		{hookbox.Filter{Source: "a", Status: hookbox.StatusDead, Limit: 50}, 5},
		{hookbox.Filter{Source: "b", Status: hookbox.StatusDead, Limit: 50}, 3 + 3},
		{hookbox.Filter{Source: "b/t2", Status: hookbox.StatusDead, Limit: 50}, 3},
		{hookbox.Filter{Status: hookbox.StatusPending, Limit: 50}, 4},
		{hookbox.Filter{Source: "b", Status: hookbox.StatusPending, Limit: 50}, 0},
		{hookbox.Filter{Status: hookbox.StatusProcessing, Limit: 50}, 2 + 2},
		{hookbox.Filter{Source: "b", Status: hookbox.StatusProcessing, Limit: 50}, 2 + 2},
		{hookbox.Filter{Status: hookbox.StatusStored, Limit: 50}, 1},
	} {
		// What a walk of every event lists.
		var walked []int64
		all, err := s.Events(ctx, hookbox.Filter{Source: c.f.Source, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			if e.Status == c.f.Status && len(walked) < c.f.Limit {
				walked = append(walked, e.ID)
			}
		}
		listed := func(f hookbox.Filter) []int64 {
			evs, err := s.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, e := range evs {
				ids = append(ids, e.ID)
			}
			return ids
		}
		if ids := listed(c.f); len(ids) != c.want || !slices.Equal(ids, walked) {
			t.Errorf("%+v: listed %v, want %d: %v", c.f, ids, c.want, walked)
		}
		// Two at a time, each page below the last one's last id.
		var paged []int64
		for f := c.f; len(paged) < c.f.Limit; {
			f.Limit = min(2, c.f.Limit-len(paged))
			ids := listed(f)
			paged = append(paged, ids...)
			if len(ids) < f.Limit {
				break
			}
			f.BeforeID = ids[len(ids)-1]
		}
		if !slices.Equal(paged, walked) {
			t.Errorf("%+v by pages of 2: listed %v, want %v", c.f, paged, walked)
		}
	}
	for _, f := range []hookbox.Filter{
		{Status: hookbox.StatusDead, Limit: 20},
		{Source: "a", Status: hookbox.StatusDead, Limit: 20},
		{Status: hookbox.StatusPending, Limit: 20},
		{Source: "a", Status: hookbox.StatusPending, Limit: 20, BeforeID: 100},
		{Status: hookbox.StatusDead, EventType: "test.event", Limit: 20},
		{Status: hookbox.StatusProcessing, Limit: 20},
		{Status: hookbox.StatusStored, Limit: 20},
	} {
		q, args := eventsQuery(f)
		for _, line := range queryPlan(t, s, q, args...) {
			if strings.HasPrefix(line, "SCAN events") && !strings.Contains(line, "INDEX events_due") &&
				!strings.Contains(line, "INDEX events_dead") && !strings.Contains(line, "INDEX events_fanout") ||
				strings.Contains(line, "sqlite_autoindex_events") {
				t.Errorf("listing %+v reads every event, or every event of its source: %s", f, line)
			}
		}
	}
}

// TestStatsReadsNoFinishedRowsAtEachCall: Stats, at each metrics scrape,
// reads the unfinished and dead events through their partial indexes
// (statsUnfinished, statsFresh), never an index of every event. The
// done events are the rest of a count of every event (a third of a
// second at three million, at every scrape): that count is read again
// at each call below slowcount.ExactBelow, and kept from one call to the next
// above it.
func TestStatsReadsNoFinishedRowsAtEachCall(t *testing.T) {
	ctx := context.Background()
	s := readsFixture(t)
	full := func() map[hookbox.Status]int {
		t.Helper()
		rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM events WHERE NOT fanout GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		want := map[hookbox.Status]int{hookbox.StatusPending: 0, hookbox.StatusProcessing: 0, hookbox.StatusDone: 0, hookbox.StatusDead: 0}
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				t.Fatal(err)
			}
			want[hookbox.Status(st)] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return want
	}
	stats := func() map[hookbox.Status]int {
		t.Helper()
		st, err := s.Stats(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st.ByStatus
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.writer.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := stats(), full(); !maps.Equal(got, want) {
		t.Errorf("Stats %v, a full scan %v", got, want)
	}
	// Below slowcount.ExactBelow, a change shows at once.
	exec(`UPDATE events SET status = 'done' WHERE id = (SELECT max(id) FROM events WHERE status = 'pending')`)
	if got, want := stats(), full(); !maps.Equal(got, want) {
		t.Errorf("after a pending event is done: Stats %v, a full scan %v", got, want)
	}
	for _, q := range []string{statsUnfinished, statsFresh} {
		for _, line := range queryPlan(t, s, q, millis(time.Now())) {
			if strings.HasPrefix(line, "SCAN events") && !strings.Contains(line, "INDEX events_due") && !strings.Contains(line, "INDEX events_dead") {
				t.Errorf("Stats reads every event at each call: %s\n%s", line, q)
			}
		}
	}

	// Past slowcount.ExactBelow done events, the count is kept from one call
	// to the next.
	exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
        INSERT INTO events (source, delivery_id, status, next_attempt_at, created_at, updated_at)
        SELECT 'bulk', 'd' || i, 'done', 0, 0, 0 FROM n`, slowcount.ExactBelow)
	before := stats()
	if want := full(); !maps.Equal(before, want) {
		t.Fatalf("Stats %v, a full scan %v", before, want)
	}
	exec(`UPDATE events SET status = 'done' WHERE id = (SELECT max(id) FROM events WHERE status = 'pending')`)
	exec(`UPDATE events SET status = 'dead' WHERE id = (SELECT max(id) FROM events WHERE status = 'pending')`)
	after, want := stats(), full()
	if after[hookbox.StatusDone] != before[hookbox.StatusDone] || want[hookbox.StatusDone] != before[hookbox.StatusDone]+1 {
		t.Errorf("done: %d, then %d after one more is done (a full scan: %d); want the count kept", before[hookbox.StatusDone], after[hookbox.StatusDone], want[hookbox.StatusDone])
	}
	// The other statuses are read at each call.
	for _, st := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDead} {
		if after[st] != want[st] {
			t.Errorf("%s: Stats %d, a full scan %d", st, after[st], want[st])
		}
	}
}

// TestReplayDryRunReadsNoFinishedRows: a dry run of a replay of dead or
// pending events (hookbox replay --dry-run --status dead --source a, or
// no status: dead and pending) finds them through events_dead and
// events_due. It read every event of the source through the (source,
// delivery_id) index, and with --status pending every row (ten seconds
// and more at three million). It finds what a replay replays.
func TestReplayDryRunReadsNoFinishedRows(t *testing.T) {
	ctx := context.Background()
	s := readsFixture(t)
	for _, f := range []hookbox.Filter{
		{Status: hookbox.StatusDead},
		{Status: hookbox.StatusDead, Source: "a"},
		{Status: hookbox.StatusDead, Source: "b"},
		{Status: hookbox.StatusPending},
		{Status: hookbox.StatusPending, Source: "a"},
		{Source: "a"},
		{Source: "b"},
		{},
	} {
		p := hookbox.ReplayParams{Filter: f, DryRun: true}
		where, args := replayWhere(p)
		cond, cargs := replayCandidates(p)
		if cond != "" {
			where, args = where+" AND "+cond, slices.Concat(args, cargs)
		}
		q := `SELECT id, length(payload) IS NULL FROM events` + where + ` ORDER BY id`
		for _, line := range queryPlan(t, s, q, args...) {
			if strings.HasPrefix(line, "SCAN events") && !strings.Contains(line, "INDEX events_due") && !strings.Contains(line, "INDEX events_dead") ||
				strings.Contains(line, "sqlite_autoindex_events") {
				t.Errorf("dry run of %+v reads every event, or every event of its source: %s", f, line)
			}
		}
		// What a walk of every event finds, and a replay replays.
		var want []int64
		all, err := s.Events(ctx, hookbox.Filter{Source: f.Source, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			if !e.FanOut && (e.Status == f.Status || f.Status == "" && (e.Status == hookbox.StatusDead || e.Status == hookbox.StatusPending)) {
				want = append(want, e.ID)
			}
		}
		slices.Sort(want)
		res, err := s.Replay(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Replayed, want) || len(want) == 0 {
			t.Errorf("dry run of %+v: %v, want %v", f, res.Replayed, want)
		}
	}
	// And a replay replays them.
	p := hookbox.ReplayParams{Filter: hookbox.Filter{Status: hookbox.StatusDead, Source: "a"}}
	dry := p
	dry.DryRun = true
	want, err := s.Replay(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Replay(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Replayed, want.Replayed) || len(got.Replayed) != 5 {
		t.Errorf("replay of %+v: %v, its dry run %v", p.Filter, got.Replayed, want.Replayed)
	}
}
