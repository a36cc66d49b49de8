package sqlite

import (
	"context"
	"fmt"
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
	s := openTemp(t)
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
	for _, q := range []string{statsUnfinished, statsFresh, statsAll} {
		noTableScan(t, s, "Stats", q, millis(time.Now()))
	}
}

// TestOverviewReadsIndexesAndRecentRows: the console's overview counts
// through indexes, like Stats, and draws its chart from the newest rows
// only: its walk down the ids stops after hookbox.OverviewOldRun rows in a row
// older than the hour, however many more there are (a row of the hour
// stored before such a stretch is the price, shown here). Its counts are
// those of a full scan.
func TestOverviewReadsIndexesAndRecentRows(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	now := time.Now()
	recent := func(src, id string) hookbox.Delivery {
		d := storetest.Delivery(src, id)
		d.ReceivedAt = now.Add(-time.Minute)
		return d
	}
	ds := []hookbox.Delivery{recent("before", "1")}
	for i := range hookbox.OverviewOldRun {
		d := storetest.Delivery("old", fmt.Sprint(i))
		d.ReceivedAt = now.Add(-3 * time.Hour)
		ds = append(ds, d)
	}
	ds = append(ds, recent("new", "1"), recent("new", "2"), recent("new", "3"))
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE events SET status = 'dead' WHERE source = 'old' AND id % 3 = 0`); err != nil {
		t.Fatal(err)
	}
	ov, err := s.Overview(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hookbox.SourceOverview{}
	for _, o := range ov {
		got[o.Source] = o
	}
	stored := func(src string) int {
		n := 0
		for _, v := range got[src].Stored {
			n += v
		}
		return n
	}
	if stored("new") != 3 || stored("old") != 0 || stored("before") != 0 {
		t.Errorf("chart: new %d, old %d, before %d; want 3, 0 and 0 (past the walk)", stored("new"), stored("old"), stored("before"))
	}
	old := got["old"].ByStatus
	if old[hookbox.StatusDead]+old[hookbox.StatusPending] != hookbox.OverviewOldRun || old[hookbox.StatusDead] != hookbox.OverviewOldRun/3 || got["new"].ByStatus[hookbox.StatusPending] != 3 {
		t.Errorf("counts: old %v, new %v", old, got["new"].ByStatus)
	}
	for _, q := range []string{overviewSources, overviewUnfinished, overviewDead} {
		noTableScan(t, s, "the overview", q)
		// Nor through an index of every event (the done ones among
		// them): a scan only of the partial indexes of the unfinished and
		// the dead, and seeks.
		for _, line := range queryPlan(t, s, q) {
			if strings.HasPrefix(line, "SCAN events") && !strings.Contains(line, "INDEX events_due") && !strings.Contains(line, "INDEX events_dead") {
				t.Errorf("the overview reads every event: %s\n%s", line, q)
			}
		}
	}
	if _, ok := got["old"].ByStatus[hookbox.StatusDone]; ok {
		t.Errorf("the overview counts done events: %v", got["old"].ByStatus)
	}
}
