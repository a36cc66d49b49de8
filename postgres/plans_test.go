package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestPlansFollowTheQueue: claims prepared while the queue is empty are
// planned again for the queue as it grows. Left to the server's default, a
// prepared statement settles on a generic plan after five runs and keeps
// it until the table is analyzed again, and the plan an empty table gets
// scans the whole table: on a server whose autovacuum is off (or has not
// run yet) every claim would then read the whole queue.
func TestPlansFollowTheQueue(t *testing.T) {
	ctx := context.Background()
	// One connection: every statement below is prepared on it.
	s, err := postgres.Open(ctx, pgtest.URL(t), postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	claim := func(by bool, running []int64) {
		t.Helper()
		p := hookbox.ClaimParams{Owner: "t", Limit: 1, Lease: time.Minute, Sources: []string{"s/a"}, ByKey: by, RunningIDs: running}
		if _, err := s.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		claim(false, nil)
		claim(false, []int64{1})
		claim(true, nil)
		for _, running := range [][]int64{nil, {1}} {
			p := hookbox.ClaimParams{Owner: "t", Limit: 2, Lease: time.Minute, Sources: []string{"s/a", "s/b"},
				Limits: []int{1, 1}, RunningIDs: running}
			if _, err := s.Claim(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Grow the queue: 20,000 deliveries over 100 order keys.
	for b := range 20 {
		ds := make([]hookbox.Delivery, 1000)
		for i := range ds {
			n := b*1000 + i
			ds[i] = storetest.Delivery("s", fmt.Sprint("d", n))
			ds[i].FanOut = true
			ds[i].Routes = []hookbox.Route{{Target: "a", OrderKey: fmt.Sprint("k", n%100)}}
		}
		if _, err := s.Ingest(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT name, statement FROM pg_prepared_statements
		WHERE statement LIKE 'WITH%FOR NO KEY UPDATE OF % SKIP LOCKED%'`)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]string{}
	for rows.Next() {
		var name, stmt string
		if err := rows.Scan(&name, &stmt); err != nil {
			t.Fatal(err)
		}
		claims[name] = stmt
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 5 {
		t.Fatalf("%d claim statements prepared on the connection, want 5 (plain, plain skipping what runs, by key, "+
			"and the two plain ones with a limit per source): %v", len(claims), claims)
	}
	// The walk of DueQueues (a read before every round of claims) seeks
	// from one queue name to the next in queue_due.
	if text := explain(t, conn, postgres.DueQueuesSQL); strings.Contains(text, "Seq Scan on queue") || !strings.Contains(text, "queue_due") {
		t.Errorf("DueQueues does not walk queue_due:\n%s", text)
	}
	for name, stmt := range claims {
		var plan []string
		args := `('t', 60000000, NULL, '{s/a}', 1, 1048576, true)` // claimDue's
		switch {
		case strings.Contains(stmt, "$10"):
			args = `('t', 60000000, NULL, 's/a', 1, '', 4096, '{k1}', 1048576, true)` // claimByKey's
		case strings.Contains(stmt, "$9"):
			args = `('t', 60000000, NULL, '{s/a,s/b}', 2, '{1}', 1048576, true, '{1,1}')` // claimDueEachSkipping's
		case strings.Contains(stmt, "s.lim"):
			args = `('t', 60000000, NULL, '{s/a,s/b}', 2, 1048576, true, '{1,1}')` // claimDueEach's
		case strings.Contains(stmt, "$8"):
			args = `('t', 60000000, NULL, '{s/a}', 1, '{1}', 1048576, true)` // claimDueSkipping's
		}
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+name+args)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan on queue") || strings.Contains(text, "Seq Scan on event_data") {
			t.Errorf("a claim scans the whole queue of 20,000 deliveries:\n%s\n%s", stmt, text)
		}
	}
}

// explain returns the plan of q on conn.
func explain(t *testing.T, conn *pgxpool.Conn, q string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `EXPLAIN `+q)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestIngestPlansItsInsertOnce: ingest's INSERT, which reads no table,
// runs on the generic plan prepared on its connection, while the two
// statements of an ingest that read event_data (the deliveries of FanOut
// events, the rows duplicates conflicted with) are planned for their
// arguments every time, and the session goes on planning everything else
// so. Where the URL sets plan_cache_mode, ingest leaves it alone.
func TestIngestPlansItsInsertOnce(t *testing.T) {
	for _, c := range []struct {
		name, param                 string
		insertGeneric, insertCustom bool
	}{
		{"default", "", true, false},
		{"url sets plan_cache_mode", "plan_cache_mode=force_custom_plan", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			url := pgtest.URL(t)
			if c.param != "" {
				sep := "?"
				if strings.Contains(url, "?") {
					sep = "&"
				}
				url += sep + c.param
			}
			s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			for b := range 8 {
				ds := []hookbox.Delivery{
					storetest.Delivery("s", fmt.Sprint("plain", b)),
					storetest.Delivery("s", fmt.Sprint("fan", b)),
					storetest.Delivery("s", "again"), // stored by the first batch, a duplicate after
				}
				ds[1].FanOut = true
				ds[1].Routes = []hookbox.Route{{Target: "a"}, {Target: "b", OrderKey: "k"}}
				rs, err := s.Ingest(ctx, ds)
				if err != nil {
					t.Fatal(err)
				}
				if rs[2].Duplicate != (b > 0) {
					t.Fatalf("batch %d: duplicate %v", b, rs[2].Duplicate)
				}
			}
			conn, err := s.AcquireConn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			plans := func(prefix string) (generic, custom int64) {
				t.Helper()
				err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
					FROM pg_prepared_statements WHERE statement LIKE $1`, prefix+"%").Scan(&generic, &custom)
				if err != nil {
					t.Fatal(err)
				}
				if generic+custom == 0 {
					t.Fatalf("no statement %q… prepared on the connection", prefix)
				}
				return generic, custom
			}
			if g, cu := plans("WITH d AS"); (g > 0) != c.insertGeneric || (cu > 0) != c.insertCustom {
				t.Errorf("ingest's INSERT: %d generic plans, %d custom; want generic %v, custom %v", g, cu, c.insertGeneric, c.insertCustom)
			}
			for _, prefix := range []string{"WITH r AS", "SELECT id, source, delivery_id, body_sha256 FROM event_data"} {
				if g, cu := plans(prefix); g != 0 || cu == 0 {
					t.Errorf("%s…: %d generic plans, %d custom; want only custom plans", prefix, g, cu)
				}
			}
			var mode string
			if err := conn.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if mode != "force_custom_plan" {
				t.Errorf("after the ingests the session plans with %s, want force_custom_plan", mode)
			}
		})
	}
}
