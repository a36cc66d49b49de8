package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// readsFixture fills a store with finished events and a few unfinished
// and dead ones, the dead among the oldest (the end of a walk down the
// ids): 3,000 events of a, 1,000 FanOut events of b with a delivery each
// to b/t, and 200 events of c, all done. It returns the store and a
// connection to its schema, the tables analyzed.
func readsFixture(t *testing.T) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	var ds []hookbox.Delivery
	for i := range 3000 {
		ds = append(ds, storetest.Delivery("a", fmt.Sprint("a", i)))
	}
	for i := range 1000 {
		d := storetest.Delivery("b", fmt.Sprint("b", i))
		d.FanOut = true
		d.Routes = []hookbox.Route{{Target: "t"}}
		ds = append(ds, d)
	}
	for i := range 200 {
		ds = append(ds, storetest.Delivery("c", fmt.Sprint("c", i)))
	}
	for b := range slices.Chunk(ds, 1000) {
		if _, err := storetest.IngestRetried(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE queue SET status = 'done'`,
		`UPDATE queue SET status = 'dead' WHERE id IN (SELECT id FROM queue WHERE source = 'a' ORDER BY id LIMIT 5)`,
		`UPDATE queue SET status = 'dead' WHERE id IN (SELECT id FROM queue WHERE source = 'b/t' ORDER BY id LIMIT 3)`,
		`UPDATE queue SET status = 'pending' WHERE id IN (SELECT id FROM queue WHERE source = 'a' ORDER BY id DESC LIMIT 4)`,
		`UPDATE queue SET status = 'processing', lease_owner = 'x' WHERE id IN (SELECT id FROM queue WHERE source = 'b/t' ORDER BY id DESC LIMIT 2)`,
		`ANALYZE queue`, `ANALYZE event_data`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return s, conn
}

// rowsRead runs q under EXPLAIN ANALYZE and returns, per table, the rows
// its scans read (returned or filtered out, over every loop), and the
// kinds of scan of each table.
func rowsRead(t *testing.T, conn *pgx.Conn, q string, args ...any) (map[string]float64, map[string][]string, string) {
	t.Helper()
	var plan []map[string]any
	if err := conn.QueryRow(context.Background(), `EXPLAIN (ANALYZE, FORMAT JSON) `+q, args...).Scan(&plan); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	read := map[string]float64{}
	scans := map[string][]string{}
	num := func(n map[string]any, k string) float64 { v, _ := n[k].(float64); return v }
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if rel, ok := n["Relation Name"].(string); ok {
			loops := num(n, "Actual Loops")
			read[rel] += (num(n, "Actual Rows") + num(n, "Rows Removed by Filter") + num(n, "Rows Removed by Index Recheck")) * loops
			scans[rel] = append(scans[rel], n["Node Type"].(string))
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	out, _ := json.MarshalIndent(plan, "", " ")
	return read, scans, string(out)
}

// TestOverviewReadsNoFinishedRows: the console's overview finds its
// sources and counts its events without reading the done ones: from
// the partial indexes of the unfinished and the dead rows, and a walk of
// the sources with one seek each. It counted them with a GROUP BY over
// the whole queue table (a second at three million rows, at each load
// of the overview). Its counts are a full scan's, but for the done ones,
// which it no longer counts; a source with only done events is still
// listed.
func TestOverviewReadsNoFinishedRows(t *testing.T) {
	t.Parallel()
	s, conn := readsFixture(t)
	ctx := context.Background()
	ov, err := s.Overview(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[hookbox.Status]int{}
	for _, o := range ov {
		got[o.Source] = o.ByStatus
	}
	rows, err := conn.Query(ctx, `SELECT source, status, count(*) FROM queue GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[hookbox.Status]int{}
	for rows.Next() {
		var src, st string
		var n int
		if err := rows.Scan(&src, &st, &n); err != nil {
			t.Fatal(err)
		}
		if want[src] == nil {
			want[src] = map[hookbox.Status]int{}
		}
		if st != string(hookbox.StatusDone) {
			want[src][hookbox.Status(st)] = n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("overview counts %v, want %v (a full scan's, done left out)", got, want)
	}
	// Nested loops and index scans forced, as TestHeldKeysLooksBehindHeadsOnly
	// does, so the server's choice on tables this small is the one it
	// makes at millions of rows; a statement that must read every row
	// still reads them, through whichever index or scan.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET enable_bitmapscan = off`); err != nil {
		t.Fatal(err)
	}
	const done = 5000 // about the done rows; the statements must read far fewer
	for _, q := range postgres.OverviewCountsSQL {
		read, scans, plan := rowsRead(t, conn, q)
		if read["queue"]+read["event_data"] > done/20 {
			t.Errorf("the overview read %v rows (by %v) of about %d done ones:\n%s\n%s", read, scans, done, q, plan)
		}
	}
}

// TestStatusListingReadsNoFinishedRows: the events listing filtered by a
// status an event leaves (pending, processing, dead: the console's dead
// page) finds its events through the partial indexes of their status.
// It walked down the ids checking each event's status: with the dead
// events among the oldest, every done event above them (seconds, for one
// page of dead events at three million). It lists what the walk listed:
// the dead deliveries and events, and the FanOut events whose deliveries
// ended dead, newest first.
func TestStatusListingReadsNoFinishedRows(t *testing.T) {
	t.Parallel()
	s, conn := readsFixture(t)
	ctx := context.Background()
	for _, c := range []struct {
		f    hookbox.Filter
		want int
	}{
		{hookbox.Filter{Status: hookbox.StatusDead, Limit: 50}, 5 + 3 + 3},
		{hookbox.Filter{Status: hookbox.StatusDead, Limit: 4}, 4},
		{hookbox.Filter{Source: "a", Status: hookbox.StatusDead, Limit: 50}, 5},
		{hookbox.Filter{Source: "b", Status: hookbox.StatusDead, Limit: 50}, 3 + 3},
		{hookbox.Filter{Status: hookbox.StatusPending, Limit: 50}, 4},
		{hookbox.Filter{Status: hookbox.StatusProcessing, Limit: 50}, 2 + 2},
	} {
		evs, err := s.Events(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		// What a walk of every event (no partial index) lists.
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
		var ids []int64
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		if len(ids) != c.want || !slices.Equal(ids, walked) {
			t.Errorf("%+v: listed %v, want %d: %v", c.f, ids, c.want, walked)
		}
	}
	// Page by page, two at a time, the pages hold what one listing of
	// every dead event does: a FanOut event on a page below its dead
	// delivery (whose id is above it) among them.
	for _, st := range []hookbox.Status{hookbox.StatusDead, hookbox.StatusProcessing} {
		all, err := s.Events(ctx, hookbox.Filter{Status: st, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var paged []hookbox.Event
		for f := (hookbox.Filter{Status: st, Limit: 2}); ; {
			evs, err := s.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, evs...)
			if len(evs) < f.Limit {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID
		}
		ids := func(evs []hookbox.Event) (out []int64) {
			for _, e := range evs {
				out = append(out, e.ID)
			}
			return out
		}
		if !slices.Equal(ids(paged), ids(all)) || len(all) == 0 {
			t.Errorf("%s, two a page: %v; listed at once: %v", st, ids(paged), ids(all))
		}
	}
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET enable_bitmapscan = off`); err != nil {
		t.Fatal(err)
	}
	const done = 5000
	for _, f := range []hookbox.Filter{
		{Status: hookbox.StatusDead, Limit: 20, BeforeID: 3000},
		{Status: hookbox.StatusDead, Limit: 20},
		{Source: "a", Status: hookbox.StatusDead, Limit: 20},
		{Status: hookbox.StatusPending, Limit: 20},
	} {
		q, args := postgres.EventsQuery(f)
		read, scans, plan := rowsRead(t, conn, q, args...)
		if read["queue"]+read["event_data"] > done/20 {
			t.Errorf("listing %+v read %v rows (by %v) of about %d done ones:\n%s", f, read, scans, done, plan)
		}
	}
}

// TestStatsReadsNoFinishedRowsAtEachCall: what Stats reads at each call
// (hookbox_events at every scrape) is the unfinished and dead events,
// through their partial indexes, and the done ones only while there are
// few: it counted every status with a GROUP BY over the whole queue
// table (a second at three million rows). Its counts are a full scan's.
// From postgres.DoneExactBelow done events on, the done count is kept:
// one more done event does not show at the next call, while the others
// do.
func TestStatsReadsNoFinishedRowsAtEachCall(t *testing.T) {
	t.Parallel()
	s, conn := readsFixture(t)
	ctx := context.Background()
	full := func() map[hookbox.Status]int {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT status, count(*) FROM queue WHERE NOT fanout GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
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
	if got, want := stats(), full(); !maps.Equal(got, want) {
		t.Errorf("Stats %v, a full scan %v", got, want)
	}
	// Below DoneExactBelow, a change shows at once.
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'done' WHERE id = (SELECT max(id) FROM queue WHERE status = 'pending')`); err != nil {
		t.Fatal(err)
	}
	if got, want := stats(), full(); !maps.Equal(got, want) {
		t.Errorf("after a pending event is done: Stats %v, a full scan %v", got, want)
	}
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET enable_bitmapscan = off`); err != nil {
		t.Fatal(err)
	}
	const done = 5000
	read, scans, plan := rowsRead(t, conn, postgres.StatsFreshSQL, int64(0))
	if read["queue"] > done/20 {
		t.Errorf("Stats read %v rows (by %v) of about %d done ones at a call:\n%s", read, scans, done, plan)
	}
	if _, err := conn.Exec(ctx, `RESET enable_seqscan; RESET enable_bitmapscan`); err != nil {
		t.Fatal(err)
	}

	// Past DoneExactBelow done events (queue rows alone: Stats reads
	// nothing else), the count is kept from one call to the next.
	if _, err := conn.Exec(ctx, `INSERT INTO queue (id, source, status) SELECT 1000000 + g, 'bulk', 'done' FROM generate_series(1, $1::int) g`,
		postgres.DoneExactBelow); err != nil {
		t.Fatal(err)
	}
	before := stats()
	if want := full(); !maps.Equal(before, want) {
		t.Fatalf("Stats %v, a full scan %v", before, want)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'done' WHERE id = (SELECT max(id) FROM queue WHERE status = 'pending' AND id < 1000000);
        UPDATE queue SET status = 'dead' WHERE id = (SELECT max(id) FROM queue WHERE status = 'pending' AND id < 1000000)`); err != nil {
		t.Fatal(err)
	}
	after, want := stats(), full()
	if after[hookbox.StatusDone] != before[hookbox.StatusDone] || want[hookbox.StatusDone] != before[hookbox.StatusDone]+1 {
		t.Errorf("done: %d, then %d after one more is done (a full scan: %d); want the count kept", before[hookbox.StatusDone], after[hookbox.StatusDone], want[hookbox.StatusDone])
	}
	for _, st := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDead} {
		if after[st] != want[st] {
			t.Errorf("%s: Stats %d, a full scan %d", st, after[st], want[st])
		}
	}
}

// brinRunsSQL reads the runs of pages event_data_created summarizes:
// pages, its pages_per_range (PostgreSQL's default, 128, unless the
// index sets one), and heap, event_data's size in pages.
const brinRunsSQL = `SELECT coalesce((SELECT option_value::int FROM pg_options_to_table(reloptions) WHERE option_name = 'pages_per_range'), 128) AS pages,
    pg_relation_size('event_data') / current_setting('block_size')::int AS heap
FROM pg_class WHERE oid = 'event_data_created'::regclass`

// rowPageSQL is the heap page an event_data row sits on, from its ctid.
const rowPageSQL = `(ctid::text::point)[0]::bigint`

// TestTimeListingReadsMatchingRanges: a listing bounded by received time
// (--since, --until) reads the runs of pages whose range of times meets
// the bound (event_data_created, a BRIN index), not every event. With no
// event near the newest, it walked down every id before answering
// nothing (3.2 s at three million). 5,000 events of 1 KiB were received
// an hour ago and three a moment ago: listing since a minute ago gives
// the three, newest first, and reads the runs of pages that hold them
// (and the last run, if partial: not yet summarized), not the table;
// listing until half an hour ago pages through the old ones as a walk
// does.
func TestTimeListingReadsMatchingRanges(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	body := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	old, now := time.Now().Add(-time.Hour), time.Now()
	var ds []hookbox.Delivery
	for i := range 5003 {
		d := storetest.Delivery("a", fmt.Sprint("a", i))
		d.Payload, d.ReceivedAt = body, old.Add(time.Duration(i)*time.Millisecond)
		if i >= 5000 {
			d.ReceivedAt = now
		}
		ds = append(ds, d)
	}
	for b := range slices.Chunk(ds, 1000) {
		if _, err := storetest.IngestRetried(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	// What autovacuum does in time (autosummarize): the full runs are
	// summarized.
	for _, q := range []string{`VACUUM ANALYZE event_data`, `ANALYZE queue`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	recent, err := s.Events(ctx, hookbox.Filter{Since: now.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 3 || recent[0].DeliveryID != "a5002" || recent[2].DeliveryID != "a5000" {
		t.Errorf("since a minute ago: %d events, want a5002, a5001, a5000", len(recent))
	}
	var paged []hookbox.Event
	for f := (hookbox.Filter{Until: old.Add(30 * time.Minute), Limit: 2000}); ; {
		evs, err := s.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, evs...)
		if len(evs) < f.Limit {
			break
		}
		f.BeforeID = evs[len(evs)-1].ID
	}
	if len(paged) != 5000 || paged[0].DeliveryID != "a4999" || paged[4999].DeliveryID != "a0" {
		t.Errorf("until half an hour ago, paged: %d events, want the 5,000 old ones, newest first", len(paged))
	}
	// Seq scans off, as in the tests above, so that the server's choice on
	// a table this small is the one it makes at millions of rows.
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	// What the listings may read: every row of the runs of pages
	// (pages_per_range of event_data_created) that hold a recent row, and
	// of the last run when it is partial (VACUUM summarizes full runs
	// only; a run not summarized is always read). Which pages the recent
	// rows land on is the server's choice, not the test's: the store
	// ingests through several sessions, each of which goes on inserting
	// into the page it last inserted into while that page has room, so
	// the three land on the last page of whichever earlier chunk their
	// session stored, in the middle of the old rows, when the pool hands
	// them that session (2 runs in 12 under load: runs holding 1,419
	// rows; 523 otherwise). A fixed share of the table was that luck.
	since := now.Add(-time.Minute)
	var allowed, runs int
	if err := conn.QueryRow(ctx, `WITH per AS (`+brinRunsSQL+`),
        placed AS (SELECT `+rowPageSQL+` / per.pages AS run, created_at FROM event_data, per),
        read AS (SELECT run FROM placed WHERE created_at >= $1
            UNION SELECT heap / pages FROM per WHERE heap % pages <> 0)
        SELECT count(*), (SELECT count(*) FROM read) FROM placed WHERE run IN (SELECT run FROM read)`, since).Scan(&allowed, &runs); err != nil {
		t.Fatal(err)
	}
	// The three are stored by one transaction, on at most two pages: the
	// runs the listing may read are at most half the table, so reading
	// the table still fails.
	if allowed > 5003/2 {
		t.Fatalf("the runs of the recent rows hold %d of 5,003 rows: a listing by runs cannot be told from a scan", allowed)
	}
	for _, f := range []hookbox.Filter{
		{Since: since, Limit: 50},
		{Since: since, Source: "a", Limit: 50},
	} {
		q, args := postgres.EventsQuery(f)
		read, scans, plan := rowsRead(t, conn, q, args...)
		if read["event_data"] > float64(allowed) {
			t.Errorf("listing %+v read %v rows (by %v) of 5,003, more than the %d of the %d runs holding recent rows or not summarized:\n%s",
				f, read, scans, allowed, runs, plan)
		}
	}
}

// TestSourceListingReadsItsOwnRows: listing one source newest first
// reads that source's rows, not every event above them. It walked down
// the ids past every other source's events: for a source with few
// events, all of them old, most of the table (7.6 s at three million
// events), and all of it for a source with none (5.9 s). A source with
// fewer than SourceFewRows rows (its events and its targets' deliveries)
// is now read from the (source, delivery_id) index, whole, and sorted;
// one with none answers without a listing. The listing is the walk's:
// the source's events and its targets' deliveries, newest first, page by
// page.
func TestSourceListingReadsItsOwnRows(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	var ds []hookbox.Delivery
	for i := range 150 { // the oldest: 150 events of few, 50 with a delivery to few/t
		d := storetest.Delivery("few", fmt.Sprint("f", i))
		if i%3 == 0 {
			d.FanOut, d.Routes = true, []hookbox.Route{{Target: "t"}}
		}
		ds = append(ds, d)
	}
	for i := range 30 { // a source whose name starts as few's does
		ds = append(ds, storetest.Delivery("few-other", fmt.Sprint("o", i)))
	}
	for i := range 5000 {
		ds = append(ds, storetest.Delivery("many", fmt.Sprint("m", i)))
	}
	for b := range slices.Chunk(ds, 1000) {
		if _, err := storetest.IngestRetried(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{`VACUUM ANALYZE event_data`, `ANALYZE queue`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// What a walk of every event lists.
	walked := func(source string, n int) []int64 {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT id FROM event_data WHERE source = $1 OR starts_with(source, $1 || '/') ORDER BY id DESC LIMIT $2`, source, n)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	ids := func(evs []hookbox.Event) (out []int64) {
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	for _, source := range []string{"few", "few-other", "many", "none"} {
		var paged []hookbox.Event
		for f := (hookbox.Filter{Source: source, Limit: 70}); ; {
			evs, err := s.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, evs...)
			if len(evs) < f.Limit || len(paged) >= 210 {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID
		}
		n := len(paged)
		if n < 210 {
			n++ // and nothing after
		}
		if want := walked(source, n); !slices.Equal(ids(paged), want) {
			t.Errorf("%s, 70 a page: %v; a walk: %v", source, ids(paged), want)
		}
	}
	evs, err := s.Events(ctx, hookbox.Filter{Source: "few", EventType: "test.event", Limit: 5})
	if err != nil || !slices.Equal(ids(evs), walked("few", 5)) {
		t.Errorf("few, by type: %v, %v; a walk: %v", ids(evs), err, walked("few", 5))
	}
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []hookbox.Filter{
		{Source: "few", Limit: 50},
		{Source: "few", Limit: 50, BeforeID: 100},
		{Source: "few-other", EventType: "test.event", Limit: 50},
		{Source: "none", Limit: 50},
	} {
		q, args, err := s.EventsStatement(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if q == "" {
			if f.Source != "none" {
				t.Errorf("listing %+v: no statement", f)
			}
			continue
		}
		read, scans, plan := rowsRead(t, conn, q, args...)
		if read["event_data"] > 1000 {
			t.Errorf("listing %+v read %v rows (by %v) of 5,230:\n%s", f, read, scans, plan)
		}
	}
}

// TestLargeQuietSourceReadsItsOwnRows: listing a source with many rows
// (SourceFewRows or more) walks down the ids from the page's start for
// at most SourceWalkIDs ids, and reads the rest of a page the walk did
// not fill from the (source, delivery_id) index. The walk had no floor:
// for a source quiet of late it read every row above the source's newest
// (6.5 s at three million events for a source of 30,000 old ones), and
// for a filter none of a large source's rows match, the whole table. The
// pages are those of the planner's statement without a source scope,
// page by page, with every filter.
func TestLargeQuietSourceReadsItsOwnRows(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	// Oldest first: quiet's SourceFewRows + 500 events, then 60,000 rows
	// shared by busy (every other one; every 10,000th is busy's, of type
	// rare: one above the walk's floor from the newest, the others below
	// it), busy/t and noise, then 30 FanOut events of busy with a
	// delivery each to busy/t. Created times follow the ids.
	quiet, shared := postgres.SourceFewRows+500, 60000
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO event_data (id, source, delivery_id, event_type, created_at)
            SELECT i, 'quiet', 'q' || i, 't' || (i % 10), now() - interval '2 days' + i * interval '1 second'
            FROM generate_series(1, $1::int) i`, []any{quiet}},
		{`INSERT INTO event_data (id, source, delivery_id, event_type, created_at)
            SELECT $1::int + i, CASE i % 4 WHEN 1 THEN 'busy/t' WHEN 3 THEN 'noise' ELSE 'busy' END, 'b' || i,
                CASE WHEN i % 10000 = 0 THEN 'rare' ELSE 't' || (i % 10) END,
                now() - interval '2 days' + ($1::int + i) * interval '1 second'
            FROM generate_series(1, $2::int) i`, []any{quiet, shared}},
		{`INSERT INTO queue (id, source, status, updated_at) SELECT id, source, 'done', created_at FROM event_data`, nil},
		{`SELECT setval('events_id_seq', $1::int)`, []any{quiet + shared}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	var ds []hookbox.Delivery
	for i := range 30 {
		d := storetest.Delivery("busy", fmt.Sprint("f", i))
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "t"}}
		ds = append(ds, d)
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`VACUUM ANALYZE event_data`, `ANALYZE queue`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// An event as the pages compare it.
	type listed struct {
		id                        int64
		source, eventType, status string
	}
	// Pages of f, each below the last one's last id, listed by list.
	pages := func(f hookbox.Filter, list func(hookbox.Filter) []listed) []listed {
		t.Helper()
		var out []listed
		for range 4 {
			evs := list(f)
			out = append(out, evs...)
			if len(evs) < f.Limit {
				break
			}
			f.BeforeID = evs[len(evs)-1].id
		}
		return out
	}
	listedBy := func(f hookbox.Filter) []listed {
		t.Helper()
		evs, err := s.Events(ctx, f)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		var out []listed
		for _, e := range evs {
			out = append(out, listed{e.ID, e.Source, e.EventType, string(e.Status)})
		}
		return out
	}
	planned := func(f hookbox.Filter) []listed {
		t.Helper()
		q, args := postgres.EventsQuery(f)
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		defer rows.Close()
		var out []listed
		for rows.Next() {
			v, err := rows.Values() // id, source, delivery_id, id_is_hash, event_type, status, …
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, listed{v[0].(int64), v[1].(string), v[4].(string), v[5].(string)})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var walkTop time.Time // the created time of the walk's lowest id from the newest
	if err := conn.QueryRow(ctx, `SELECT created_at FROM event_data WHERE id = (SELECT max(id) FROM event_data) + 1 - $1`,
		postgres.SourceWalkIDs).Scan(&walkTop); err != nil {
		t.Fatal(err)
	}
	for _, f := range []hookbox.Filter{
		{Source: "quiet", Limit: 70},
		{Source: "quiet", Limit: 70, EventType: "t3", Until: walkTop.Add(-45000 * time.Second)},
		{Source: "busy", Limit: 70},
		{Source: "busy", Limit: 70, Status: hookbox.StatusDone},
		{Source: "busy", Limit: 70, EventType: "rare"}, // one from the walk, the rest below its floor
		{Source: "busy", Limit: 4, EventType: "rare"},
		{Source: "busy", Limit: 70, EventType: "absent"},
		{Source: "busy", Limit: 70, Since: walkTop.Add(-time.Hour)},
		{Source: "busy/t", Limit: 70},
		{Source: "busy", Limit: 70, BeforeID: 20000},
		{Source: "busy", Limit: 70, BeforeID: int64(quiet + shared + 1000)},
	} {
		got, want := pages(f, listedBy), pages(f, planned)
		if !slices.Equal(got, want) || len(want) == 0 && f.EventType != "absent" {
			t.Errorf("%+v: listed %d events %v…, the planner's statement %d %v…", f, len(got), got[:min(len(got), 4)], len(want), want[:min(len(want), 4)])
		}
	}

	// What the listings read: at most the walk and the source's rows
	// (and 1,000 more, for the rows listed by id; the walk without a
	// floor read 60,000), and the rest of the page from the (source,
	// delivery_id) index. Seq scans off, as in the
	// tests above, so that the server's choice on a table this small is
	// the one it makes at millions of rows. (For a source that holds a
	// large share of the table, the server reads the rest of a page a
	// filter few of its rows match by a scan of the table, which costs
	// about what reading the source's rows through the index does: not
	// checked here.)
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f         hookbox.Filter
		fromIndex bool
	}{
		{hookbox.Filter{Source: "quiet", Limit: 50}, true},
		{hookbox.Filter{Source: "quiet", Limit: 50, EventType: "t3"}, true},
		{hookbox.Filter{Source: "busy", Limit: 50}, false},
	} {
		q, args, err := s.EventsStatement(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var own int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM event_data WHERE source = $1 OR starts_with(source, $1 || '/')`, c.f.Source).Scan(&own); err != nil {
			t.Fatal(err)
		}
		read, scans, plan := rowsRead(t, conn, q, args...)
		if limit := float64(postgres.SourceWalkIDs + own + 1000); read["event_data"] > limit {
			t.Errorf("listing %+v read %v rows (by %v), more than the walk and the source's %d rows:\n%s", c.f, read, scans, own, plan)
		}
		if c.fromIndex && !strings.Contains(plan, "events_source_delivery_id_key") {
			t.Errorf("listing %+v: the rest of its page is not read from the (source, delivery_id) index:\n%s", c.f, plan)
		}
	}
}
