package worker

import (
	"testing"
	"time"
)

// TestExhaustedDelayLongRun: the wait after a long run of attempts given
// back for want of hookbox's own resources stays between BackoffMin and
// a minute (or BackoffMax), however long the run. BackoffMin<<(run-1)
// overflowed for runs of about 35 with a BackoffMin of 1 s (the default),
// the wait went negative and rand.N panicked.
func TestExhaustedDelayLongRun(t *testing.T) {
	for _, pol := range []Policy{
		DefaultPolicy,
		{MaxAttempts: 5, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Hour, Timeout: time.Second},
		{MaxAttempts: 5, BackoffMin: 10 * time.Second, BackoffMax: time.Hour, Timeout: time.Second},
	} {
		for run := int64(1); run <= 100; run++ {
			var d time.Duration
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("BackoffMin %v, run %d: panic: %v", pol.BackoffMin, run, r)
					}
				}()
				d = exhaustedDelay(pol, 1, run)
			}()
			if d < pol.BackoffMin || d > max(time.Minute, 2*pol.BackoffMin) {
				t.Errorf("BackoffMin %v, run %d: wait %v, want %v to a minute", pol.BackoffMin, run, d, pol.BackoffMin)
			}
		}
	}
}

// TestDoubledNeverWraps: doubling a wait never wraps past its limit. The
// backoff's old check (a doubled wait above 0 and below the ceiling) let
// a wrapped one through: 4,194,305 ns shifted 42 times wraps to 2^42 ns
// (73 min), which it took for a ceiling under 2 h.
func TestDoubledNeverWraps(t *testing.T) {
	for _, c := range []struct {
		base  time.Duration
		shift int64
		limit time.Duration
		want  time.Duration
	}{
		{time.Second, 0, time.Minute, time.Second},
		{time.Second, 5, time.Minute, 32 * time.Second},
		{time.Second, 6, time.Minute, time.Minute},
		{time.Second, 34, time.Minute, time.Minute}, // wrapped negative
		{4194305, 42, 2 * time.Hour, 2 * time.Hour}, // wrapped to 73 min
		{time.Second, 200, time.Minute, time.Minute},
		{time.Second, -1, time.Minute, time.Minute},
		{time.Hour, 0, time.Minute, time.Minute},
	} {
		if got := doubled(c.base, c.shift, c.limit); got != c.want {
			t.Errorf("doubled(%v, %d, %v) = %v, want %v", c.base, c.shift, c.limit, got, c.want)
		}
	}
	pol := Policy{MaxAttempts: 5, BackoffMin: 4194305, BackoffMax: 2 * time.Hour, Timeout: time.Second}
	for n := 1; n <= 200; n++ {
		if d := pol.Backoff(n); d < pol.BackoffMin || d > pol.BackoffMax {
			t.Fatalf("Backoff(%d) = %v, want %v to %v", n, d, pol.BackoffMin, pol.BackoffMax)
		}
		if d := conflictDelay(pol, n); d < 0 || d > pol.BackoffMin {
			t.Fatalf("conflictDelay(%d) = %v, want 0 to %v", n, d, pol.BackoffMin)
		}
	}
}
