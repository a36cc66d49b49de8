package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"reflect"
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

// sourceFixture is a store holding, oldest first: source few's 150
// events, 50 of them FanOut with a delivery to few/t; few-other's 30 (a
// name that starts as few's does); quiet's sourceFewRows + 500; then
// sourceWalkIDs + 10,000 rows shared by busy (every other one; every
// 10,000th row is busy's, of type "rare": one below the walk's floor
// from the newest, the others above it), busy/t and noise. Their created times follow
// their ids.
func sourceFixture(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	s := openTemp(t)
	var ds []hookbox.Delivery
	for i := range 150 {
		d := storetest.Delivery("few", fmt.Sprint("f", i))
		if i%3 == 0 {
			d.FanOut, d.Routes = true, []hookbox.Route{{Target: "t"}}
		}
		ds = append(ds, d)
	}
	for i := range 30 {
		ds = append(ds, storetest.Delivery("few-other", fmt.Sprint("o", i)))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE events SET status = 'done' WHERE source = 'few/t' AND delivery_id IN ('f0', 'f3')`, nil},
		{`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
            INSERT INTO events (source, delivery_id, event_type, status, next_attempt_at, created_at, updated_at)
            SELECT 'quiet', 'q' || i, 't' || (i % 10), 'done', 0, 1000 + i, 1000 + i FROM n`, []any{sourceFewRows + 500}},
		{`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
            INSERT INTO events (source, delivery_id, event_type, status, next_attempt_at, created_at, updated_at)
            SELECT CASE i % 4 WHEN 1 THEN 'busy/t' WHEN 3 THEN 'noise' ELSE 'busy' END, 'b' || i,
                CASE WHEN i % 10000 = 0 THEN 'rare' ELSE 't' || (i % 10) END, 'done', 0, 100000 + i, 100000 + i FROM n`,
			[]any{sourceWalkIDs + 10000}},
	} {
		if _, err := s.writer.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// recordingQueryer runs its statements on a database and keeps them.
type recordingQueryer struct {
	db         queryer
	statements []recordedStatement
}

type recordedStatement struct {
	q    string
	args []any
}

func (r *recordingQueryer) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.statements = append(r.statements, recordedStatement{q, args})
	return r.db.QueryContext(ctx, q, args...)
}

// TestSourceListingReadsItsOwnRows: listing one source newest first (the
// most common operator listing: hookbox events list --source a, the
// console's source page) reads that source's rows, not every row of the
// source sorted. SQLite's planner read every row of the source through
// the (source, delivery_id) index and sorted them (a second a page for a
// source of 600,000 events at three million), and a source with none
// could walk every id. Now a source with no rows runs no listing, one
// with fewer than sourceFewRows is read from that index and its ids
// sorted, and one with more is walked down the ids, with no sort, for
// sourceWalkIDs ids, the rest of the page read from the index. The
// listing is what the planner's statement lists: the source's events and
// its targets' deliveries, newest first, page by page, with every other
// filter.
func TestSourceListingReadsItsOwnRows(t *testing.T) {
	ctx := context.Background()
	s := sourceFixture(t)
	ids := func(evs []hookbox.Event) (out []int64) {
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	// Pages of f from list, each below the last one's last id.
	pages := func(f hookbox.Filter, n int, list func(hookbox.Filter) ([]hookbox.Event, error)) []hookbox.Event {
		t.Helper()
		var out []hookbox.Event
		for range n {
			evs, err := list(f)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			out = append(out, evs...)
			if len(evs) < listLimit(f) {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID
		}
		return out
	}
	planned := func(f hookbox.Filter) ([]hookbox.Event, error) {
		q, args := eventsQuery(f)
		return listEvents(ctx, s.reader, q, args)
	}
	for _, f := range []hookbox.Filter{
		{Source: "few", Limit: 70},
		{Source: "few", Limit: 70, Status: hookbox.StatusDone},
		{Source: "few", Limit: 70, EventType: "test.event", BeforeID: 100},
		{Source: "few-other", Limit: 70},
		{Source: "few/t", Limit: 70},
		{Source: "quiet", Limit: 70},
		{Source: "quiet", Limit: 70, EventType: "t3", Until: time.UnixMilli(5000)},
		{Source: "busy", Limit: 70},
		{Source: "busy", Limit: 70, EventType: "rare"}, // from the walk, then 1 below its floor
		{Source: "busy", Limit: 4, EventType: "rare"},
		{Source: "busy", Limit: 70, EventType: "absent"},
		{Source: "busy", Limit: 70, Since: time.UnixMilli(100000 + sourceWalkIDs), Status: hookbox.StatusDone},
		{Source: "busy/t", Limit: 70},
		{Source: "busy", Limit: 70, BeforeID: 20000},
		{Source: "none", Limit: 70},
		{Source: "few", Limit: 1 << 20},
	} {
		got, want := pages(f, 4, func(f hookbox.Filter) ([]hookbox.Event, error) { return s.Events(ctx, f) }), pages(f, 4, planned)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: listed %d events %v…, the planner's statement %d %v…", f, len(got), ids(got)[:min(len(got), 8)], len(want), ids(want)[:min(len(want), 8)])
		}
	}

	// The statements each listing runs, and what their plans read.
	for _, c := range []struct {
		f hookbox.Filter
		// want is the number of statements after the scope's, and
		// whether the last reads the source's rows from the index.
		want      int
		fromIndex bool
	}{
		{hookbox.Filter{Source: "none", Limit: 50}, 0, false},
		{hookbox.Filter{Source: "few", Limit: 50}, 1, true},
		{hookbox.Filter{Source: "few", Limit: 50, BeforeID: 100, EventType: "test.event"}, 1, true},
		{hookbox.Filter{Source: "busy", Limit: 50}, 1, false},
		{hookbox.Filter{Source: "busy", Limit: 50, BeforeID: 30000}, 1, false},
		{hookbox.Filter{Source: "busy", Limit: 50, Since: time.UnixMilli(100000 + sourceWalkIDs)}, 1, false},
		{hookbox.Filter{Source: "quiet", Limit: 50}, 2, true},
	} {
		rec := &recordingQueryer{db: s.reader}
		if _, err := listBySource(ctx, rec, c.f); err != nil {
			t.Fatal(err)
		}
		if len(rec.statements) != 1+c.want || rec.statements[0].q != sourceScopeSQL {
			t.Errorf("listing %+v ran %d statements, want the scope's and %d", c.f, len(rec.statements), c.want)
		}
		var listings int
		for _, st := range rec.statements {
			plan := queryPlan(t, s, st.q, st.args...)
			text := strings.Join(plan, "\n")
			for _, line := range plan {
				if strings.HasPrefix(line, "SCAN events") {
					t.Errorf("listing %+v reads every event: %s\n%s", c.f, line, text)
				}
			}
			if st.q != sourceScopeSQL {
				listings++
			}
			switch {
			case st.q == sourceScopeSQL: // the source's rows counted in the index, no table row
				if !strings.Contains(text, "COVERING INDEX "+uniqueIndex) {
					t.Errorf("listing %+v: the scope is not read from %s:\n%s", c.f, uniqueIndex, text)
				}
			case listings == c.want && c.fromIndex:
				if !strings.Contains(text, "INDEX "+uniqueIndex) {
					t.Errorf("listing %+v: its rows are not read from %s:\n%s", c.f, uniqueIndex, text)
				}
			default: // a walk down the ids, in their order
				if strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, uniqueIndex) {
					t.Errorf("listing %+v reads the source's rows and sorts them:\n%s", c.f, text)
				}
			}
		}
	}
}
