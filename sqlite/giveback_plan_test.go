package sqlite

import (
	"strings"
	"testing"
)

// TestGiveBackRunPlan: giveBack reads an event's run of give-backs under
// the write lock, at every give-back: along the event's index entries,
// newest first, never sorted apart.
func TestGiveBackRunPlan(t *testing.T) {
	s := openTemp(t)
	for _, line := range queryPlan(t, s, giveBackRunSQL, 1, maxGiveBacks) {
		if !strings.Contains(line, "attempts_event") || strings.Contains(line, "TEMP B-TREE") {
			t.Errorf("giveBackRunSQL's plan: %s", line)
		}
	}
}
