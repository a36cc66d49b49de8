package sqlite

import (
	"context"
	"testing"
)

// TestCloseRowsReportsStepError: a statement that fails after it has
// returned rows is an error, not a short result. SQLite's abs of the
// smallest integer fails ("integer overflow") on the second row here,
// after the first was read; Close alone then returns nil.
func TestCloseRowsReportsStepError(t *testing.T) {
	s := openTemp(t)
	rows, err := s.reader.QueryContext(context.Background(),
		`SELECT abs(CASE WHEN value = 2 THEN -9223372036854775807 - 1 ELSE value END) FROM json_each('[1, 2, 3]')`)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("read %v before the failing row; want [1]", got)
	}
	if err := closeRows(rows); err == nil {
		t.Errorf("closeRows returned nil after reading %v of 3 rows: the failure of the second was lost", got)
	}
}
