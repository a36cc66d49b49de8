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
	for _, n := range []int{-3, 0, 1} {
		if d := p.Backoff(n); d != p.BackoffMin {
			t.Errorf("Backoff(%d) = %v, want %v (the first retry's)", n, d, p.BackoffMin)
		}
	}
}
