package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// openTemp opens a store on a new file, closed when the test ends.
func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queryPlan returns the lines of EXPLAIN QUERY PLAN for q with args.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.reader.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// noTableScan fails the test when q's plan reads the events table
// through no index.
func noTableScan(t *testing.T, s *Store, what, q string, args ...any) {
	t.Helper()
	for _, line := range queryPlan(t, s, q, args...) {
		if strings.HasPrefix(line, "SCAN events") && !strings.Contains(line, "INDEX") {
			t.Errorf("%s scans the table: %s\n%s", what, line, q)
		}
	}
}
