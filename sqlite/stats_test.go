package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// TestStatsReadsNoTableScan: Stats counts through indexes, never by a
// scan of the events table, whose rows hold the payloads (at ten million
// events such a scan read every page of the file on each metrics
// scrape); and its counts are those of a full scan.
func TestStatsReadsNoTableScan(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ds []hookbox.Delivery
	for i := range 40 {
		ds = append(ds, storetest.Delivery("a", fmt.Sprint("d", i)))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	// Some done, some dead, some processing, the rest pending; and a
	// fan-out record, which is no event of its own.
	for _, q := range []string{
		`UPDATE events SET status = 'done' WHERE id <= 20`,
		`UPDATE events SET status = 'dead' WHERE id > 20 AND id <= 25`,
		`UPDATE events SET status = 'processing', lease_owner = 'x' WHERE id > 25 AND id <= 28`,
		`UPDATE events SET fanout = 1, status = 'done' WHERE id = 1`,
		`UPDATE events SET fanout = 1, status = 'dead' WHERE id = 21`,
	} {
		if _, err := s.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Stats(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM events WHERE NOT fanout GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[hookbox.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		want[hookbox.Status(st)] = n
	}
	for _, status := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDone, hookbox.StatusDead} {
		if st.ByStatus[status] != want[status] {
			t.Errorf("%s: Stats says %d, a scan %d", status, st.ByStatus[status], want[status])
		}
	}
	for _, q := range []string{statsUnfinished, statsRest} {
		plan, err := s.reader.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, millis(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		for plan.Next() {
			var id, parent, unused int
			var detail string
			if err := plan.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(detail, "SCAN events") && !strings.Contains(detail, "INDEX") {
				t.Errorf("Stats scans the table: %s\n%s", detail, q)
			}
		}
		plan.Close()
	}
}
