package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestClearPayloadsFinishesAnOlderClearing: an event whose payload an
// older hookbox cleared kept its headers and last error; the next
// run clears those too, and the run after it finds nothing.
func TestClearPayloadsFinishesAnOlderClearing(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	d := storetest.Delivery("s", "1")
	d.Header.Set("X-Shop-Domain", "shop.example")
	id := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", d)[0]
	// What ClearPayloads did before it dropped more than the payload.
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `UPDATE event_data SET payload = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET last_error = 'the app answered 422' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for run, want := range []int{1, 0} {
		if n, err := s.ClearPayloads(ctx, time.Now().Add(-time.Hour)); err != nil || n != want {
			t.Fatalf("run %d: ClearPayloads = %d, %v; want %d", run+1, n, err, want)
		}
	}
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Header) != 0 || e.LastError != "" || !e.PayloadCleared {
		t.Errorf("event cleared by an older hookbox, after a run: headers %v, last error %q", e.Header, e.LastError)
	}
}

// TestClearBatchReadsBySlice: a payload clearing batch reads and writes
// each table by index, for the rows of its slice, never scanning one
// whole: a batch's work is bounded by its slice, and a run over a table of
// N rows is not N/1000 scans of it. Two scans were planned, once a batch,
// as soon as the tables had statistics: the payloads' update as a hash
// join over all of event_data, and the check that a FanOut event has no
// delivery left to work as a hashed subplan built from all of event_data
// and a queue lookup for each row.
func TestClearBatchReadsBySlice(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	for b := range 20 {
		ds := make([]hookbox.Delivery, 1000)
		for i := range ds {
			ds[i] = storetest.Delivery("s", fmt.Sprint("d", b*1000+i))
			if i%2 == 0 {
				ds[i].FanOut, ds[i].Routes = true, []hookbox.Route{{Target: "a"}}
			}
		}
		if _, err := s.Ingest(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	conn := connect(t, url)
	for _, q := range []string{
		`UPDATE queue SET status = 'done', updated_at = now() - interval '2 days' + id * interval '1 ms'`,
		`INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
            SELECT id, 1, 'w', 'retry', 'the app answered 500', now(), now() FROM queue`,
		`ANALYZE event_data`, `ANALYZE queue`, `ANALYZE attempts`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN `+postgres.ClearBatchSQL, time.Now().Add(-time.Hour), time.Time{}, int64(0))
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
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
	for _, line := range plan {
		if strings.Contains(line, "Seq Scan") || strings.Contains(line, "hashed SubPlan") {
			t.Errorf("a clearing batch reads a table whole (%s):\n%s", strings.TrimSpace(line), strings.Join(plan, "\n"))
			break
		}
	}
}
