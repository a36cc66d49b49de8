package worker_test

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox/worker"
)

// TestBackoffBounds: a retry waits between BackoffMin and BackoffMax
// whatever the attempt number, including numbers below 1 (read as 1: a
// shift by a negative count panicked) and those whose doubling would
// overflow.
func TestBackoffBounds(t *testing.T) {
	p := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Minute}
	for _, n := range []int{-3, 0, 1, 2, 7, 62, 63, 64, 1000} {
		for range 20 {
			if d := p.Backoff(n); d < p.BackoffMin || d > p.BackoffMax {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, d, p.BackoffMin, p.BackoffMax)
			}
		}
	}
}

// TestFirstRetryJittered: the waits before the first retry of many events
// spread over [BackoffMin, 2·BackoffMin], so that a burst of events that
// failed together does not retry together, and those before later retries
// over [BackoffMin, min(BackoffMax, BackoffMin·2ⁿ⁻¹)], as they always
// did. Backoff(1) always returned BackoffMin.
func TestFirstRetryJittered(t *testing.T) {
	p := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Minute}
	for _, c := range []struct {
		n       int
		ceiling time.Duration
	}{{-3, 2 * time.Second}, {1, 2 * time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, time.Minute}} {
		const draws = 1000
		// Count the draws in each quarter of the range: each should get
		// about 250; fewer than 100 in any means the waits bunch up (the
		// chance of that with uniform draws is below 1e-25).
		var quarters [4]int
		span := c.ceiling - p.BackoffMin
		for range draws {
			d := p.Backoff(c.n)
			if d < p.BackoffMin || d > c.ceiling {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", c.n, d, p.BackoffMin, c.ceiling)
			}
			quarters[min(int(4*(d-p.BackoffMin)/(span+1)), 3)]++
		}
		for i, k := range quarters {
			if k < 100 {
				t.Errorf("Backoff(%d): %d of %d draws in quarter %d of [%v, %v] (by quarter: %v), want them spread", c.n, k, draws, i+1, p.BackoffMin, c.ceiling, quarters)
			}
		}
	}
	// No room to spread: BackoffMax is the floor.
	flat := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Second}
	if d := flat.Backoff(1); d != time.Second {
		t.Errorf("Backoff(1) = %v with BackoffMin = BackoffMax = 1s", d)
	}
}
