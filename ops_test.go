package hookbox_test

import (
	"errors"
	"math"
	"strconv"
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
// characters in the last error whatever the caller checked, cut on a
// character's boundary; a reason of that many characters is kept whole,
// however many bytes they take.
func TestSkipErrorCutsTheReason(t *testing.T) {
	long := strings.Repeat("é", hookbox.MaxSkipReason+10) // 2 bytes each
	got := hookbox.SkipError("test", long, "")
	if !strings.Contains(got, strings.Repeat("é", hookbox.MaxSkipReason)+"…") || strings.Contains(got, strings.Repeat("é", hookbox.MaxSkipReason+1)) || !utf8.ValidString(got) {
		t.Errorf("SkipError with a reason of %d characters: %d bytes, valid UTF-8 %v; want it cut at %d characters", hookbox.MaxSkipReason+10, len(got), utf8.ValidString(got), hookbox.MaxSkipReason)
	}
	whole := strings.Repeat("日", hookbox.MaxSkipReason) // 3 bytes each
	if got := hookbox.SkipError("test", whole, ""); !strings.HasSuffix(got, ": "+whole) {
		t.Errorf("SkipError with a reason of %d characters (%d bytes) cut it: %q", hookbox.MaxSkipReason, len(whole), got)
	}
	if short := hookbox.SkipError("test", "gone", ""); !strings.HasSuffix(short, ": gone") {
		t.Errorf("SkipError with a short reason = %q", short)
	}
}

// TestSkipJudge: what SkipParams.Judge decides for each kind of delivery
// a store reads, including the two the store conformance tests do not
// reach: a delivery with no order key keeps none, and one whose key is
// already its own releases nothing.
func TestSkipJudge(t *testing.T) {
	key := func(s string) *string { return &s }
	show := func(k *string) string {
		if k == nil {
			return "none"
		}
		return strconv.Quote(*k)
	}
	p := hookbox.SkipParams{ID: 7, Reason: "gone", Via: "test", Key: func(d string) string { return "own:" + d }}
	dead := hookbox.SkipCandidate{Status: hookbox.StatusDead, DeliveryID: "d1"}
	two := 2
	died := func(attempts int, skipped bool) hookbox.SkipCandidate {
		d := dead
		d.OrderKey, d.Attempts, d.Skipped = key("K"), attempts, skipped
		return d
	}
	for _, tc := range []struct {
		name     string
		d        hookbox.SkipCandidate
		expect   *int
		refused  bool
		changed  bool
		already  bool
		key      *string
		released string
	}{
		{name: "fan-out event", d: hookbox.SkipCandidate{Status: hookbox.StatusDead, FanOut: true}, refused: true},
		{name: "pending", d: hookbox.SkipCandidate{Status: hookbox.StatusPending, OrderKey: key("K")}, refused: true},
		{name: "skipped before", d: hookbox.SkipCandidate{Status: hookbox.StatusDead, Skipped: true}, already: true},
		{name: "no key", d: dead},
		{name: "shared key", d: func() hookbox.SkipCandidate { d := dead; d.OrderKey = key("K"); return d }(), key: key("own:d1"), released: "K"},
		{name: "own key", d: func() hookbox.SkipCandidate { d := dead; d.OrderKey = key("own:d1"); return d }(), key: key("own:d1")},
		{name: "attempts as seen", d: died(2, false), expect: &two, key: key("own:d1"), released: "K"},
		{name: "died again since seen", d: died(3, false), expect: &two, refused: true, changed: true},
		{name: "replayed since seen", d: func() hookbox.SkipCandidate { d := died(3, false); d.Status = hookbox.StatusPending; return d }(),
			expect: &two, refused: true, changed: true},
		{name: "skipped before, as seen", d: died(2, true), expect: &two, already: true},
		{name: "skipped, then died again since seen", d: died(3, true), expect: &two, refused: true, changed: true},
		{name: "seen before its first attempt", d: died(1, false), expect: new(int), refused: true, changed: true},
	} {
		p := p
		p.Expect = tc.expect
		c, err := p.Judge(tc.d)
		var ns *hookbox.NotSkippableError
		if refused := errors.As(err, &ns); refused != tc.refused || (!refused && err != nil) {
			t.Errorf("%s: error %v, want refused %v", tc.name, err, tc.refused)
			continue
		}
		if tc.refused {
			if ns.ID != 7 || ns.FanOut != tc.d.FanOut || (!ns.FanOut && ns.Status != tc.d.Status) || (ns.FanOut && ns.Status != "") ||
				ns.Changed != tc.changed || (tc.changed && (ns.Attempts != tc.d.Attempts || ns.Expected != *tc.expect)) {
				t.Errorf("%s: refusal %+v", tc.name, ns)
			}
			if tc.changed && !strings.Contains(ns.Error(), "changed since you looked") {
				t.Errorf("%s: refusal reads %q", tc.name, ns.Error())
			}
			continue
		}
		if c.Result.ID != 7 || c.Result.Already != tc.already || c.Result.Released != tc.released ||
			(c.OrderKey == nil) != (tc.key == nil) || (c.OrderKey != nil && *c.OrderKey != *tc.key) {
			t.Errorf("%s: change %+v (key %s), want already %v, key %s, released %q", tc.name, c.Result, show(c.OrderKey), tc.already, show(tc.key), tc.released)
		}
		if want := hookbox.SkipError("test", "gone", tc.released); !tc.already && c.LastError != want {
			t.Errorf("%s: last error %q, want %q", tc.name, c.LastError, want)
		}
	}
}

// TestReplayWaitNeverOverflows: the wait of a replay's i-th event grows
// with i and stays positive however far the pace goes: a replay that goes
// on from another (ReplayParams.PaceAfter, a count the API takes from its
// caller) or a slow pace made i·1s overflow time.Duration, and the events
// fell due in the past, or centuries apart in the wrong order.
func TestReplayWaitNeverOverflows(t *testing.T) {
	for _, rate := range []int{1, 3, hookbox.DefaultReplayRate, 1 << 40} {
		p := hookbox.ReplayParams{Rate: rate}
		last := time.Duration(0)
		for _, i := range []int{0, rate - 1, rate, 1 << 20, 1 << 33, 1 << 40, 1 << 62, math.MaxInt - 1, math.MaxInt} {
			if i < 0 {
				continue
			}
			w := p.ReplayWait(i)
			if w < last {
				t.Fatalf("rate %d: the %dth event waits %v, less than one before it (%v)", rate, i, w, last)
			}
			last = w
		}
	}
}
