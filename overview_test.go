package hookbox

import (
	"testing"
	"time"
)

// TestWalkStoredStops: the chart's walk counts the events of its span,
// page after page, passes a few older ones among them, and stops after
// OverviewOldRun older events in a row, asking for no page after that.
func TestWalkStoredStops(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 30, 0, 0, time.UTC)
	recent, old := now.Add(-time.Minute), now.Add(-3*time.Hour)
	// Ids 1..n: from the top, 2,500 recent events with an old one every
	// 100, then OverviewOldRun old ones, then 50 recent ones the walk
	// never reaches, then more old ones.
	var created []time.Time
	for range 30000 {
		created = append(created, old)
	}
	for range 50 {
		created = append(created, recent)
	}
	for range OverviewOldRun {
		created = append(created, old)
	}
	for i := range 2500 {
		if i%100 == 0 {
			created = append(created, old)
		}
		created = append(created, recent)
	}
	pages := 0
	b := NewOverviewBuilder(now)
	err := b.WalkStored(func(before int64, n int) ([]StoredRow, error) {
		pages++
		var out []StoredRow
		for id := min(before-1, int64(len(created))); id >= 1 && len(out) < n; id-- {
			out = append(out, StoredRow{ID: id, Source: "s", Created: created[id-1]})
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ov := b.Result()
	if len(ov) != 1 || ov[0].Stored[OverviewMinutes-2] != 2500 {
		t.Fatalf("chart %+v, want the 2,500 recent events of the top", ov)
	}
	// The top 2,525 and the 10,000 old ones below them fill 13 pages of
	// 1,000; the 30,050 below are never asked for.
	if pages != 13 {
		t.Errorf("%d pages asked for, want 13: the walk did not stop after the old stretch", pages)
	}
}
