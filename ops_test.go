package hookbox_test

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestDaysAgo: day counts past the cap are refused instead of wrapping
// time.Duration (from 106,752 days) into a cut-off in the future, which
// would purge every finished event.
func TestDaysAgo(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, days := range []int{0, 1, 30, hookbox.MaxDays} {
		got, err := hookbox.DaysAgo(now, days)
		want := now.AddDate(0, 0, -days)
		if err != nil || got.After(now) || got.Sub(want).Abs() > 48*time.Hour {
			t.Errorf("DaysAgo(%d) = %v, %v; want about %v", days, got, err, want)
		}
	}
	for _, days := range []int{-1, hookbox.MaxDays + 1, 106752, 200000, 1 << 40} {
		if got, err := hookbox.DaysAgo(now, days); err == nil {
			t.Errorf("DaysAgo(%d) = %v, want an error", days, got)
		}
	}
	if err := hookbox.CheckCutoff(now.Add(time.Second), now); err == nil {
		t.Errorf("CheckCutoff accepted a cut-off after now")
	}
	if err := hookbox.CheckCutoff(now, now); err != nil {
		t.Errorf("CheckCutoff(now) = %v", err)
	}
}
