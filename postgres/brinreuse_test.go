package postgres_test

import (
	"context"
	"fmt"
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

// TestTimeListingFindsRowsInFreedPages: a listing bounded by received
// time (--since, --until) finds the events ingest stored in space a
// retention purge freed, though those pages lie in runs whose BRIN
// summaries (event_data_created) were computed when the runs held only
// old events. The index widens a summarized run's range at each insert
// into it; a run whose summary still said "two days ago" would be
// skipped by a listing since a minute ago, and its new events never
// listed. 5,000 events of 1 KiB received two days ago are summarized
// (VACUUM), nine in ten are purged by Store.Purge (the tenth are dead,
// kept), VACUUM frees their space (run again while another session's
// old snapshot keeps the purged rows), and 400 events received now land in
// the freed pages (checked, not assumed: by ctid, in runs whose summary
// before the ingest ended two days ago). Listing since a minute ago,
// and between a minute ago and a minute ahead, page by page, gives
// exactly the 400; listing until an hour ago gives exactly the 500
// survivors; each, run as the server would run it at millions of rows
// (by the BRIN index), gives the same.
func TestTimeListingFindsRowsInFreedPages(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	body := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	old := time.Now().Add(-48 * time.Hour)
	var ds []hookbox.Delivery
	for i := range 5000 {
		d := storetest.Delivery("a", fmt.Sprint("old", i))
		d.Payload, d.ReceivedAt = body, old.Add(time.Duration(i)*time.Millisecond)
		ds = append(ds, d)
	}
	for b := range slices.Chunk(ds, 1000) {
		if _, err := storetest.IngestRetried(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	// Worked two days ago; every tenth died (a purge keeps dead events).
	exec(`UPDATE queue q SET status = CASE WHEN d.id % 10 = 0 THEN 'dead' ELSE 'done' END, updated_at = d.created_at
        FROM event_data d WHERE d.id = q.id`)
	// What autovacuum does in time (autosummarize): the full runs of
	// pages are summarized, each with a range of times two days ago.
	exec(`VACUUM ANALYZE event_data`)
	type run struct{ lo, hi time.Time }
	summarized := map[int64]run{}
	var pagesPerRange, heap int64
	if err := conn.QueryRow(ctx, brinRunsSQL).Scan(&pagesPerRange, &heap); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT `+rowPageSQL+` / $1 AS run, min(created_at), max(created_at) FROM event_data
        GROUP BY 1 HAVING `+rowPageSQL+` / $1 < $2::bigint / $1`, pagesPerRange, heap)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int64
		var r run
		if err := rows.Scan(&n, &r.lo, &r.hi); err != nil {
			t.Fatal(err)
		}
		summarized[n] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(summarized) < 3 {
		t.Fatalf("%d summarized runs of %d pages after 5,000 events of 1 KiB, want several", len(summarized), pagesPerRange)
	}

	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res != (hookbox.PurgeResult{Done: 4500}) {
		t.Fatalf("purge = %+v, want the 4,500 done events", res)
	}
	// What autovacuum does after a purge: the space of the deleted rows
	// is free, and recorded in the free space map, where ingest looks
	// for a page with room once the page its session last filled is
	// full (or forgotten: VACUUM's update of the table's statistics
	// makes every session forget its page). Here every new event lands
	// in a freed page, from page 0 up; the check below says so.
	// VACUUM frees only rows no transaction of the database can still
	// see: while another session (another test's, in another schema) has
	// a snapshot older than the purge, the purged rows stay, no page has
	// room, and the new events go to new pages at the end. So VACUUM is
	// run again until it reports no dead row left (n_dead_tup, which a
	// VACUUM sets to the rows it could not yet remove).
	exec(`VACUUM queue`)
	vacuums := 0
	for attempt := 1; ; attempt++ {
		vacuums = attempt
		exec(`VACUUM event_data`)
		var dead int64
		if err := conn.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables
            WHERE schemaname = current_schema() AND relname = 'event_data'`).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead == 0 {
			break
		}
		if attempt == 300 {
			t.Fatalf("VACUUM left %d purged rows of event_data after %d attempts: some session holds an old snapshot", dead, attempt)
		}
		time.Sleep(100 * time.Millisecond) // for that session's transaction to end
	}

	now := time.Now()
	var fresh []hookbox.Delivery
	for i := range 400 {
		d := storetest.Delivery("a", fmt.Sprint("new", i))
		d.Payload, d.ReceivedAt = body, now
		fresh = append(fresh, d)
	}
	var newIDs []int64
	for b := range slices.Chunk(fresh, 100) {
		rs, err := s.Ingest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			newIDs = append(newIDs, r.ID)
		}
	}
	slices.Reverse(newIDs) // newest first, as listed
	exec(`ANALYZE event_data`)
	exec(`ANALYZE queue`)

	// The layout the test is about, checked: new events stored in freed
	// pages of runs summarized when they held only old events, which a
	// summary not widened at insert would exclude from a listing since
	// a minute ago.
	since := now.Add(-time.Minute)
	rows, err = conn.Query(ctx, `SELECT `+rowPageSQL+` FROM event_data WHERE id = ANY($1)`, newIDs)
	if err != nil {
		t.Fatal(err)
	}
	var stale, minPage int64 = 0, -1
	for rows.Next() {
		var page int64
		if err := rows.Scan(&page); err != nil {
			t.Fatal(err)
		}
		if r, ok := summarized[page/pagesPerRange]; ok && r.hi.Before(since) {
			stale++
		}
		if minPage < 0 || page < minPage {
			minPage = page
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("400 new events: %d of them in freed pages of %d runs summarized two days ago; the lowest on page %d (VACUUMs after the purge: %d)", stale, len(summarized), minPage, vacuums)
	if stale == 0 {
		t.Fatalf("no new event was stored in a freed page of a summarized run (lowest page %d; %d runs of %d pages summarized): the case is not exercised",
			minPage, len(summarized), pagesPerRange)
	}

	survivors := func() (ids []int64) {
		for i := 4999; i >= 0; i-- {
			if (int64(i)+1)%10 == 0 { // ids start at 1 in a fresh schema
				ids = append(ids, int64(i)+1)
			}
		}
		return ids
	}()
	var first int64
	if err := conn.QueryRow(ctx, `SELECT min(id) FROM event_data`).Scan(&first); err != nil || first != 10 {
		t.Fatalf("lowest id left %d (%v), want 10: the survivors are the ids divisible by ten", first, err)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format(time.TimeOnly)
	}
	for _, c := range []struct {
		f    hookbox.Filter
		want []int64
	}{
		{hookbox.Filter{Since: since, Limit: 70}, newIDs},
		{hookbox.Filter{Since: since, Until: now.Add(time.Minute), Limit: 70}, newIDs},
		{hookbox.Filter{Until: now.Add(-time.Hour), Limit: 70}, survivors},
		{hookbox.Filter{Since: old, Until: old.Add(time.Second), Limit: 70}, survivors[len(survivors)-100:]},
	} {
		// As the store lists them, page by page.
		var got []int64
		for f := c.f; ; {
			evs, err := s.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				got = append(got, e.ID)
			}
			if len(evs) < f.Limit {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("listing since %s until %s, %d a page: %d events, want %d (%s)",
				at(c.f.Since), at(c.f.Until), c.f.Limit, len(got), len(c.want), idsDiff(got, c.want))
		}
		// As the server lists them at millions of rows, by the runs of
		// event_data_created (seq and plain index scans off on a session
		// of the test), in one page: with BeforeID the planner may as
		// well read the ids' index, which the pages above checked.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off`); err != nil {
			t.Fatal(err)
		}
		f := c.f
		f.Limit = 1000
		q, args := postgres.EventsQuery(f)
		rows, err := tx.Query(ctx, `EXPLAIN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(plan, "\n"), "event_data_created") {
			t.Fatalf("listing %+v does not read event_data_created:\n%s", f, strings.Join(plan, "\n"))
		}
		if rows, err = tx.Query(ctx, `SELECT l.id FROM (`+q+`) l`, args...); err != nil {
			t.Fatal(err)
		}
		if got, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("listing since %s until %s by event_data_created: %d events, want %d (%s)",
				at(c.f.Since), at(c.f.Until), len(got), len(c.want), idsDiff(got, c.want))
		}
	}
}

// idsDiff names a few ids one listing has and the other lacks.
func idsDiff(got, want []int64) string {
	missing := slices.DeleteFunc(slices.Clone(want), func(id int64) bool { return slices.Contains(got, id) })
	extra := slices.DeleteFunc(slices.Clone(got), func(id int64) bool { return slices.Contains(want, id) })
	return fmt.Sprintf("missing %v, extra %v", missing[:min(5, len(missing))], extra[:min(5, len(extra))])
}
