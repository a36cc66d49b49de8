package hookbox_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// TestSkipErrorCutsTheReason: a skip's reason is kept to MaxSkipReason
// bytes in the last error whatever the caller checked, cut on a
// character's boundary.
func TestSkipErrorCutsTheReason(t *testing.T) {
	long := strings.Repeat("é", hookbox.MaxSkipReason) // 2 bytes each
	got := hookbox.SkipError("test", long, "")
	if len(got) > len(hookbox.SkipPrefix)+hookbox.MaxSkipReason+32 || !utf8.ValidString(got) {
		t.Errorf("SkipError with a reason of %d bytes: %d bytes, valid UTF-8 %v", len(long), len(got), utf8.ValidString(got))
	}
	if short := hookbox.SkipError("test", "gone", ""); !strings.HasSuffix(short, ": gone") {
		t.Errorf("SkipError with a short reason = %q", short)
	}
}
