package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// listedIDs runs a listing statement and returns the ids it lists.
func listedIDs(t *testing.T, conn *pgx.Conn, q string, args ...any) []int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v[0].(int64))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestStatusTopListsAsAllCandidates: a status listing that filters on
// nothing else (statusTop: a window of the newest rows, the page's
// length of them in the status, parents only from the deliveries above
// the lowest) lists what the statement reading every row in the status
// lists, on random events: plain ones and FanOut ones with 0 to 3
// deliveries of sources with targets, in mixed statuses, the window
// holding a page or not, at random BeforeIDs and page after page.
func TestStatusTopListsAsAllCandidates(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 35))
	var ds []hookbox.Delivery
	for i := range 600 {
		src := []string{"a", "b", "c"}[r.IntN(3)]
		d := storetest.Delivery(src, fmt.Sprint(src, i))
		if r.IntN(2) == 0 {
			d.FanOut = true
			for k := range r.IntN(4) {
				d.Routes = append(d.Routes, hookbox.Route{Target: fmt.Sprint("t", k)})
			}
		}
		ds = append(ds, d)
	}
	for b := range slices.Chunk(ds, 50) {
		if _, err := s.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT setseed(0.35)`); err != nil {
		t.Fatal(err)
	}
	// Statuses in runs of ids (a backlog, dead among done ones) and at
	// random: the window holds a page or not.
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = (ARRAY['pending','processing','done','dead'])[1 + floor(random() * 4)::int],
    lease_owner = 'x' WHERE NOT fanout`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = CASE WHEN random() < 0.1 THEN 'dead' ELSE 'done' END
    WHERE NOT fanout AND id < (SELECT min(id) + (max(id) - min(id)) / 2 FROM queue)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'pending' WHERE NOT fanout AND id > (SELECT max(id) - 200 FROM queue) AND random() < 0.8`); err != nil {
		t.Fatal(err)
	}
	var lo, hi int64
	if err := conn.QueryRow(ctx, `SELECT min(id), max(id) FROM queue`).Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	compared, paged := 0, 0
	full := map[bool]int{}
	for _, st := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDead} {
		for _, limit := range []int{1, 2, 3, 5, 10, 50, 200} {
			befores := []int64{0, hi + 1}
			for range 8 {
				befores = append(befores, lo+r.Int64N(hi-lo+1))
			}
			for _, before := range befores {
				f := hookbox.Filter{Status: st, Limit: limit, BeforeID: before}
				if !postgres.StatusOnly(f) {
					t.Fatalf("%+v is not read by statusTop", f)
				}
				q, args := postgres.EventsQuery(f)
				got := listedIDs(t, conn, q, args...)
				q, args = postgres.EventsQueryAllCandidates(f)
				want := listedIDs(t, conn, q, args...)
				if !slices.Equal(got, want) {
					t.Fatalf("%+v: listed %v, every candidate lists %v", f, got, want)
				}
				compared++
				// Which way statusTop found them: a page's length of
				// rows in the status (in the window, but for dead), or
				// every row in it.
				window := int64(limit * postgres.StatusWindow)
				if st == hookbox.StatusDead {
					window = 1 << 40
				}
				full[count(t, conn, `SELECT count(*) FROM (SELECT status, fanout FROM queue WHERE ($1 = 0 OR id < $1)
    ORDER BY id DESC LIMIT $2) w WHERE status = $3 AND NOT fanout`, before, window, string(st)) >= limit]++
			}
			// Page after page to the end, by what each page listed.
			for f := (hookbox.Filter{Status: st, Limit: limit}); ; paged++ {
				q, args := postgres.EventsQuery(f)
				got := listedIDs(t, conn, q, args...)
				q, args = postgres.EventsQueryAllCandidates(f)
				if want := listedIDs(t, conn, q, args...); !slices.Equal(got, want) {
					t.Fatalf("%+v: listed %v, every candidate lists %v", f, got, want)
				}
				if len(got) < limit {
					break
				}
				f.BeforeID = got[len(got)-1]
			}
		}
	}
	// The data holds what the comparison is for: FanOut events listed
	// in each status, and pages found in the window.
	for _, st := range []string{"pending", "processing", "dead"} {
		if n := count(t, conn, `SELECT count(*) FROM events WHERE fanout AND `+postgres.StatusSummarySQL+` = $1`, st); n < 5 {
			t.Errorf("%d FanOut events read %s", n, st)
		}
	}
	if full[true] == 0 || full[false] == 0 {
		t.Errorf("listings of a page's length of rows found, and not: %v", full)
	}
	t.Logf("%d listings compared (%v: found a page's length of rows, or not), %d pages", compared, full, paged)
}

// TestStatusListingReadsAPageOfABacklog: a page of a backlog of 5,000
// pending events, the newest, reads its window of the queue and the
// page's event rows, not the backlog. The listing read every pending
// row and looked up each one's parent (10,000 rows and more). When the
// pending rows are not among the newest, it reads the window more than
// every pending row.
func TestStatusListingReadsAPageOfABacklog(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	const backlog = 5000
	var ds []hookbox.Delivery
	for i := range 1000 + backlog {
		ds = append(ds, storetest.Delivery("a", fmt.Sprint("a", i)))
	}
	for b := range slices.Chunk(ds, 1000) {
		if _, err := storetest.IngestRetried(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE queue SET status = 'done' WHERE id < (SELECT min(id) + 1000 FROM queue)`,
		`ANALYZE queue`, `ANALYZE event_data`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var hi int64
	if err := conn.QueryRow(ctx, `SELECT max(id) FROM queue`).Scan(&hi); err != nil {
		t.Fatal(err)
	}
	for _, f := range []hookbox.Filter{
		{Status: hookbox.StatusPending, Limit: 50},
		{Status: hookbox.StatusPending, Limit: 50, BeforeID: hi - 100},
	} {
		q, args := postgres.EventsQuery(f)
		read, scans, plan := rowsRead(t, conn, q, args...)
		if n := read["queue"] + read["event_data"]; n > backlog/2 {
			t.Errorf("a page of %+v read %v rows (by %v) of %d pending ones:\n%s", f, read, scans, backlog, plan)
		} else {
			t.Logf("%+v read %v", f, read)
		}
		if evs, err := s.Events(ctx, f); err != nil || len(evs) != f.Limit {
			t.Errorf("%+v: listed %d events, %v", f, len(evs), err)
		}
	}
	// The backlog among the oldest: the window holds none of it, and the
	// page is read from every pending row, as before.
	for _, q := range []string{
		`UPDATE queue SET status = 'done' WHERE id > (SELECT max(id) - 3000 FROM queue)`,
		`ANALYZE queue`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	f := hookbox.Filter{Status: hookbox.StatusPending, Limit: 50}
	q, args := postgres.EventsQuery(f)
	got := listedIDs(t, conn, q, args...)
	q, args = postgres.EventsQueryAllCandidates(f)
	if want := listedIDs(t, conn, q, args...); !slices.Equal(got, want) || len(got) != f.Limit {
		t.Errorf("backlog among the oldest: listed %v, want %v", got, want)
	}
	q, args = postgres.EventsQuery(f)
	read, _, _ := rowsRead(t, conn, q, args...)
	q, args = postgres.EventsQueryAllCandidates(f)
	before, _, _ := rowsRead(t, conn, q, args...)
	t.Logf("backlog among the oldest: read %v, every candidate %v", read, before)
	if read["queue"] > before["queue"]+float64(f.Limit*postgres.StatusWindow)+float64(f.Limit) {
		t.Errorf("backlog among the oldest: read %v rows, more than %v and the window", read, before)
	}
	// Those 2,000 dead: a page reads the page of the dead rows' index,
	// not every dead row (nor the window: dead rows are few, and often
	// the oldest).
	for _, q := range []string{`UPDATE queue SET status = 'dead' WHERE status = 'pending'`, `ANALYZE queue`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The first page and the next (which reads the dead rows above it
	// too, for their parents).
	f = hookbox.Filter{Status: hookbox.StatusDead, Limit: 50}
	for range 2 {
		q, args = postgres.EventsQuery(f)
		got := listedIDs(t, conn, q, args...)
		q, args = postgres.EventsQueryAllCandidates(f)
		if want := listedIDs(t, conn, q, args...); !slices.Equal(got, want) || len(got) != f.Limit {
			t.Errorf("%+v: listed %v, want %v", f, got, want)
		}
		q, args = postgres.EventsQuery(f)
		read, scans, plan := rowsRead(t, conn, q, args...)
		if n := read["queue"] + read["event_data"]; n > 500 {
			t.Errorf("a page of %+v read %v rows (by %v) of 2,000 dead ones:\n%s", f, read, scans, plan)
		} else {
			t.Logf("%+v read %v", f, read)
		}
		f.BeforeID = got[len(got)-1]
	}
}
