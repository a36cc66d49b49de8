package hookbox_test

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestAttemptTook: a duration only for an attempt that finished after it
// started; a first attempt that succeeded, read from its event, has the
// same start and finish (hookbox.AttemptStored) and no duration.
func TestAttemptTook(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		a        hookbox.Attempt
		took     time.Duration
		hasTaken bool
	}{
		{"ran", hookbox.Attempt{StartedAt: at, FinishedAt: at.Add(1500 * time.Millisecond)}, 1500 * time.Millisecond, true},
		{"read from its event", hookbox.Attempt{StartedAt: at, FinishedAt: at}, 0, false},
		{"not finished", hookbox.Attempt{StartedAt: at}, 0, false},
		{"clock stepped back", hookbox.Attempt{StartedAt: at, FinishedAt: at.Add(-time.Second)}, 0, false},
	} {
		if took, ok := c.a.Took(); took != c.took || ok != c.hasTaken {
			t.Errorf("%s: Took() = %v, %v; want %v, %v", c.name, took, ok, c.took, c.hasTaken)
		}
	}
}
