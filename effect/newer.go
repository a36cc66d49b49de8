package effect

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hookbox/hookbox"
)

// identifier is what ApplyIfNewer accepts as a table or column name.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ApplyIfNewer protects a row against stale updates: it writes row (column
// → value) into table, keyed by the key column, unless the stored row's
// version column already holds a value at least as new as row[version]. It
// reports whether it wrote. Use it where events about one object can
// arrive or be retried out of order (a subscription's "updated" events):
// an older state never overwrites a newer one.
//
// It is one statement, INSERT … ON CONFLICT (key) DO UPDATE … WHERE the
// stored version is older, so the check and the write cannot be split by
// a concurrent transaction on either store. key must have a unique
// constraint; version may be any column type both sides compare (an
// integer, a timestamp, or RFC 3339 text in UTC). A stored row whose
// version is NULL is older than any version; row[version] must not be nil.
// Table and column names must be plain identifiers; values are bound,
// never spliced.
func ApplyIfNewer(ctx context.Context, tx *hookbox.Tx, table, key, version string, row map[string]any) (bool, error) {
	cols := make([]string, 0, len(row))
	for c := range row {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, name := range append([]string{table, key, version}, cols...) {
		if !identifier.MatchString(name) {
			return false, fmt.Errorf("apply if newer: %q is not a plain table or column name", name)
		}
	}
	if _, ok := row[key]; !ok {
		return false, fmt.Errorf("apply if newer: the row has no value for the key column %s", key)
	}
	if v, ok := row[version]; !ok || v == nil {
		return false, fmt.Errorf("apply if newer: the row has no value for the version column %s", version)
	}
	params := make([]string, len(cols))
	var sets []string
	args := make([]any, len(cols))
	for i, c := range cols {
		params[i], args[i] = "$"+strconv.Itoa(i+1), row[c]
		if c != key {
			sets = append(sets, c+" = excluded."+c)
		}
	}
	q := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(params, ", ") + `)
        ON CONFLICT (` + key + `) DO UPDATE SET ` + strings.Join(sets, ", ") + `
        WHERE ` + table + `.` + version + ` IS NULL OR ` + table + `.` + version + ` < excluded.` + version
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	return n > 0, nil
}
