package sqlite

import (
	"strings"
	"testing"
)

// TestTrimByCountUsesIndexes: the statements that trim the rejected log by
// group read indexes only, and sort nothing: each write runs them under
// the write lock, over a log of up to its count bound.
func TestTrimByCountUsesIndexes(t *testing.T) {
	s := openTemp(t)
	for _, c := range []struct {
		what, q string
		args    []any
	}{
		{"counting the unknown names' rows", countUnknown, nil},
		{"counting each source's rows", countSources, nil},
		{"trimming the unknown names' rows", trimUnknown, []any{10}},
		{"trimming a source's rows", trimSource, []any{"stripe", 10}},
	} {
		plan := queryPlan(t, s, c.q, c.args...)
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN rejected_deliveries") && !strings.Contains(line, "INDEX") ||
				strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s: %s\n%s", c.what, strings.Join(plan, "; "), c.q)
			}
		}
		t.Logf("%s: %s", c.what, strings.Join(plan, "; "))
	}
}
