package effect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
)

// sqliteInstant returns an SQLite expression for the instant the time
// text in column v names, in seconds to the millisecond, or NULL when it
// names none. The driver writes a time.Time as Go's time.String does
// ("2026-11-30 09:00:00.5 +0900 JST"), which SQLite's date functions do
// not read: its date and time, and its offset written as "+09:00", are
// taken apart and given to unixepoch. Text in a form SQLite reads itself
// (ISO 8601) is given as it is.
func sqliteInstant(v string) string {
	sp := `instr(substr(` + v + `, 12), ' ')` // the space after the time of day, from position 11
	return `(CASE WHEN ` + v + ` GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]* [+-][0-9][0-9][0-9][0-9]*'` +
		` THEN unixepoch(substr(` + v + `, 1, ` + sp + ` + 10) || substr(` + v + `, ` + sp + ` + 12, 3) || ':' || substr(` + v + `, ` + sp + ` + 15, 2), 'subsec')` +
		` ELSE unixepoch(` + v + `, 'subsec') END)`
}

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
// constraint. A stored row whose version is NULL is older than any
// version; row[version] must not be nil, nor a value bound as NULL (an
// invalid sql.NullInt64, a nil pointer).
//
// The versions are compared by the database, so they must compare as they
// should on the store in use, and be of the version column's type: a
// version of another type is refused with an error on both stores.
// (PostgreSQL cannot convert it. SQLite keeps each value with its own
// type and orders every number before every text: it would keep an
// integer given to a TEXT column as text, "10" before "9", and a text
// version in an INTEGER column, "" from a missing field, would be newer
// than every number for good; on SQLite, integer and real versions are
// one type.)
//
//   - an integer (a Stripe event's created, a sequence number), in an
//     integer column: on both stores;
//   - a time.Time: ApplyIfNewer puts it in UTC before binding it. SQLite
//     stores it as text, zone included; ApplyIfNewer compares the instants
//     the stored and the given text name (to the millisecond, the text
//     breaking a tie), so versions stored in another zone, by an earlier
//     hookbox or by hand, compare right too (stored text that names no
//     time SQLite can read is compared as text). On PostgreSQL use a
//     timestamptz column;
//   - text only if its order as text is the order of the versions: fixed
//     width, one zone. RFC 3339 text from time.RFC3339Nano is not, since it
//     drops trailing zeros ("…05Z" sorts after "…05.5Z", so a newer state
//     is refused); format times with a fixed-width layout such as
//     "2006-01-02T15:04:05.000000000Z07:00" in UTC, or pass a time.Time.
//
// Table and column names must be plain identifiers, which both databases
// read in any case ("ID" is "id"): a row that names a column twice, in two
// cases, is refused. Values are bound, never spliced.
func ApplyIfNewer(ctx context.Context, tx *hookbox.Tx, table, key, version string, row map[string]any) (bool, error) {
	cols := make([]string, 0, len(row))
	for c := range row {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	seen := make(map[string]string, len(cols))
	for _, name := range append([]string{table, key, version}, cols...) {
		if !identifier.MatchString(name) {
			return false, fmt.Errorf("apply if newer: %q is not a plain table or column name", name)
		}
	}
	// Both databases fold unquoted names to one case: two names of the
	// row that differ only in case name one column (SQLite took both and
	// wrote the row under the key given as "ID", not the one given as
	// "id").
	for _, c := range cols {
		if other, ok := seen[strings.ToLower(c)]; ok {
			return false, fmt.Errorf("apply if newer: the row names column %s twice, as %q and %q", strings.ToLower(c), other, c)
		}
		seen[strings.ToLower(c)] = c
	}
	if _, ok := row[key]; !ok {
		return false, fmt.Errorf("apply if newer: the row has no value for the key column %s", key)
	}
	v, ok := row[version]
	if !ok || v == nil {
		return false, fmt.Errorf("apply if newer: the row has no value for the version column %s", version)
	}
	// A value the driver binds as NULL (an invalid sql.NullInt64, a nil
	// pointer) is no version either: written, it would let any state,
	// however old, overwrite the row.
	bound, err := driver.DefaultParameterConverter.ConvertValue(v)
	if err == nil && bound == nil {
		return false, fmt.Errorf("apply if newer: the row's version %s binds as NULL", version)
	}
	var number bool
	switch bound.(type) {
	case int64, float64:
		number = err == nil
	}
	params := make([]string, len(cols))
	var sets []string
	args := make([]any, len(cols))
	stored, given := table+"."+version, "excluded."+version
	older := stored + ` < ` + given
	for i, c := range cols {
		params[i], args[i] = "$"+strconv.Itoa(i+1), row[c]
		if t, ok := args[i].(time.Time); ok && c == version {
			// SQLite keeps a time as text, zone included: it is written
			// in UTC, and compared as the instant it names, since
			// versions written before in another zone do not sort as
			// text (see sqliteInstant).
			args[i] = t.UTC()
			if tx.Dialect == hookbox.DialectSQLite {
				s, g := sqliteInstant(stored), sqliteInstant(given)
				older = `CASE WHEN ` + s + ` IS NULL OR ` + g + ` IS NULL THEN ` + stored + ` < ` + given +
					` ELSE ` + s + ` < ` + g + ` OR (` + s + ` = ` + g + ` AND ` + stored + ` < ` + given + `) END`
			}
		}
		if c != key {
			sets = append(sets, c+" = excluded."+c)
		}
	}
	insert := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(params, ", ") + `)
        ON CONFLICT (` + key + `) DO UPDATE SET `
	if tx.Dialect == hookbox.DialectSQLite {
		return applySQLite(ctx, tx, insert, strings.Join(sets, ", "), table, version, older, number, args)
	}
	res, err := tx.ExecContext(ctx, insert+strings.Join(sets, ", ")+` WHERE `+stored+` IS NULL OR `+older, args...)
	if err != nil {
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	return n > 0, nil
}

// applySQLite is ApplyIfNewer's statement on SQLite, which keeps each
// value with its own type, whatever the column's, and orders every number
// before every text (and all text before every blob) whatever their
// values. PostgreSQL refuses a version of another type than its column
// with an error; here it would be compared by type, silently: an integer
// in a TEXT column is kept as text ("10" before "9"), and a text version
// in an INTEGER column ("" from a missing field) is newer than every
// number, for good. So a version is compared only with one of its kind
// (integer and real are one), and an error says when they differ, or when
// a number (number: the given version binds as one) was kept as text.
// Whatever ends in an error is taken back (a savepoint), so nothing is
// written then, as on PostgreSQL.
//
// SQLite runs one write transaction at a time: the statement that finds
// why a write was refused sees the row the refusal saw.
func applySQLite(ctx context.Context, tx *hookbox.Tx, insert, sets, table, version string, older string, number bool, args []any) (applied bool, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT effect_apply_if_newer`); err != nil {
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	defer func() {
		end := []string{`RELEASE effect_apply_if_newer`}
		if err != nil {
			end = []string{`ROLLBACK TO effect_apply_if_newer`, end[0]}
		}
		for _, q := range end {
			if _, endErr := tx.ExecContext(ctx, q); endErr != nil && err == nil {
				applied, err = false, fmt.Errorf("apply if newer to %s: %w", table, endErr)
			}
		}
	}()
	stored, given := table+"."+version, "excluded."+version
	kind := func(v string) string {
		return `(CASE typeof(` + v + `) WHEN 'real' THEN 'integer' ELSE typeof(` + v + `) END)`
	}
	alike := kind(stored) + ` = ` + kind(given)
	if number {
		alike += ` AND typeof(` + given + `) <> 'text'`
	}
	var kept string
	err = tx.QueryRowContext(ctx, insert+sets+` WHERE `+stored+` IS NULL OR (`+alike+` AND (`+older+`))
        RETURNING typeof(`+version+`)`, args...).Scan(&kept)
	switch {
	case err == nil && number && kept == "text":
		return false, fmt.Errorf("apply if newer to %s: the number given as %s is kept as text by the column, and would compare as text (\"10\" before \"9\"): declare the column INTEGER", table, version)
	case err == nil:
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	// Refused: as older or as new, or as another type, which this
	// statement finds (its write of the row to itself is taken back).
	var was string
	err = tx.QueryRowContext(ctx, insert+version+` = `+stored+` WHERE NOT (`+alike+`)
        RETURNING typeof(`+version+`)`, args...).Scan(&was)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("apply if newer to %s: %w", table, err)
	}
	given = "a value of another type"
	if number {
		given = "a number"
	}
	return false, fmt.Errorf("apply if newer to %s: %s of type %s stored, %s given: SQLite would compare them by type, not value (a TEXT column keeps a number as text: \"10\" before \"9\"); give versions of one type, the column's",
		table, version, was, given)
}
