package worker

import (
	"errors"
	"testing"
	"time"
)

// TestRetryAfterCap: a Retry-After is honoured up to MaxRetryAfter, or up
// to BackoffMax when that is longer; a shorter one leaves the backoff.
func TestRetryAfterCap(t *testing.T) {
	err := errors.New("429 Too Many Requests")
	for _, c := range []struct {
		max, after, want time.Duration
	}{
		{100 * time.Millisecond, 3 * time.Second, 3 * time.Second},
		{100 * time.Millisecond, 2 * time.Hour, MaxRetryAfter},
		{6 * time.Hour, 3 * time.Hour, 3 * time.Hour},
		{6 * time.Hour, 10 * time.Hour, 6 * time.Hour},
	} {
		p := Policy{BackoffMin: time.Millisecond, BackoffMax: c.max}
		if d := p.retryDelay(1, RetryAfter(err, c.after)); d != c.want {
			t.Errorf("BackoffMax %v, Retry-After %v: wait %v, want %v", c.max, c.after, d, c.want)
		}
	}
	p := Policy{BackoffMin: time.Second, BackoffMax: time.Minute}
	if d := p.retryDelay(1, RetryAfter(err, time.Millisecond)); d < time.Second {
		t.Errorf("a Retry-After shorter than the backoff: wait %v, want the backoff (at least 1s)", d)
	}
}
