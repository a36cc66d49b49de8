package sqlite

import (
	"strings"
	"testing"
)

// TestDueQueuesPlan: the walk of DueQueues reads only events_due, one seek
// per queue name, never the table: it runs before every round of claims.
func TestDueQueuesPlan(t *testing.T) {
	s := openTemp(t)
	noTableScan(t, s, "due queues", dueQueues, 0)
	for _, line := range queryPlan(t, s, dueQueues, 0) {
		if strings.Contains(line, "events") && !strings.Contains(line, "events_due") {
			t.Errorf("due queues reads events outside events_due: %s", line)
		}
	}
}
