package effect_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestApplyIfNewer: on both stores, an update older than or as old as the
// stored row is refused and changes nothing; a newer one is written; a bad
// name is refused before any SQL runs.
func TestApplyIfNewer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE subscriptions (id TEXT PRIMARY KEY, plan TEXT NOT NULL, version BIGINT NOT NULL)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		apply := func(plan string, version int64) bool {
			t.Helper()
			var applied bool
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				var err error
				applied, err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
					map[string]any{"id": "sub_1", "plan": plan, "version": version})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return applied
		}
		plan := func() string {
			t.Helper()
			var p string
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				return tx.QueryRowContext(ctx, `SELECT plan FROM subscriptions WHERE id = 'sub_1'`).Scan(&p)
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		steps := []struct {
			plan    string
			version int64
			applied bool
			stored  string
		}{
			{"pro", 2, true, "pro"},    // first write
			{"basic", 1, false, "pro"}, // older: refused
			{"team", 2, false, "pro"},  // as old: refused
			{"business", 3, true, "business"},
		}
		for _, s := range steps {
			if got := apply(s.plan, s.version); got != s.applied {
				t.Errorf("version %d: applied %v, want %v", s.version, got, s.applied)
			}
			if p := plan(); p != s.stored {
				t.Errorf("after version %d: plan %q, want %q", s.version, p, s.stored)
			}
		}
		err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.ApplyIfNewer(ctx, tx, "subscriptions; DROP TABLE x", "id", "version", map[string]any{"id": "a", "version": 1})
			return err
		})
		if err == nil {
			t.Error("a table name with SQL in it was accepted")
		}
	})
}

// TestApplyIfNewerOverNullVersion: on both stores, a stored row whose
// version is NULL (written before versions were kept, say) is updated by
// any versioned state; NULL < x is never true in SQL, so a plain comparison
// refused every update to it, silently. A row without a version is refused.
func TestApplyIfNewerOverNullVersion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT, version BIGINT)`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO subscriptions (id, status, version) VALUES ('sub_1', 'trialing', NULL)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var applied bool
		if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			var err error
			applied, err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
				map[string]any{"id": "sub_1", "status": "active", "version": int64(1)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := status(t, st, "sub_1"); !applied || got != "active" {
			t.Errorf("over a NULL version: applied %v, status %q; want true, active", applied, got)
		}
		err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
				map[string]any{"id": "sub_1", "status": "canceled", "version": nil})
			return err
		})
		if err == nil {
			t.Error("a row whose version is nil was accepted")
		}
		if got := status(t, st, "sub_1"); got != "active" {
			t.Errorf("after a nil version: status %q, want active", got)
		}
	})
}

// status reads the status column of subscription id.
func status(t *testing.T, st dbtest.Store, id string) string {
	t.Helper()
	var s string
	err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT status FROM subscriptions WHERE id = $1`, id).Scan(&s)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplyIfNewerTimesInZones: on both stores, time.Time versions compare
// as instants whatever their zones. SQLite keeps a time as text with its
// zone, so before times were put in UTC a newer state given in UTC-5 sorted
// below an older one in UTC and was refused silently, and an older one in
// UTC+9 sorted above it and was written.
func TestApplyIfNewerTimesInZones(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		createVersioned(t, st, "TIMESTAMP WITH TIME ZONE")
		utc := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
		east, west := time.FixedZone("UTC+9", 9*3600), time.FixedZone("UTC-5", -5*3600)
		steps := []struct {
			status  string
			version time.Time
			applied bool
		}{
			{"trialing", utc, true},
			{"active", utc.Add(time.Hour).In(west), true},           // 10:00 in UTC-5: newer
			{"canceled", utc.Add(30 * time.Minute).In(east), false}, // 23:30 in UTC+9: older
			{"past_due", utc.Add(time.Hour).In(east), false},        // as old
			{"unpaid", utc.Add(time.Hour + time.Second/2), true},    // newer by half a second
			{"paused", utc.Add(time.Hour + time.Second), true},      // a whole second after a fraction
		}
		for _, s := range steps {
			applyVersioned(t, st, s.status, s.version, s.applied)
		}
	})
}

// TestApplyIfNewerFixedWidthText: on both stores, RFC 3339 text in one
// fixed-width layout compares as its times do, across whole seconds and
// fractions. (time.RFC3339Nano is not fixed-width: it drops trailing zeros,
// and "…00Z" sorts after "…00.5Z"; the documentation says so.)
func TestApplyIfNewerFixedWidthText(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		createVersioned(t, st, "TEXT")
		const layout = "2006-01-02T15:04:05.000000000Z07:00"
		at := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
		steps := []struct {
			status  string
			version time.Time
			applied bool
		}{
			{"trialing", at.Add(time.Second / 2), true},
			{"canceled", at, false},
			{"active", at.Add(time.Second), true},
			{"past_due", at.Add(time.Second), false},
		}
		for _, s := range steps {
			applyVersioned(t, st, s.status, s.version.Format(layout), s.applied)
		}
	})
}

// createVersioned creates the table subscriptions with a version column of
// type typ.
func createVersioned(t *testing.T, st dbtest.Store, typ string) {
	t.Helper()
	err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL, version `+typ+` NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// applyVersioned applies status at version to sub_1 and checks that it was
// applied, or refused, as want says.
func applyVersioned(t *testing.T, st dbtest.Store, status string, version any, want bool) {
	t.Helper()
	before := statusOf(t, st)
	var applied bool
	err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		var err error
		applied, err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
			map[string]any{"id": "sub_1", "status": status, "version": version})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after := statusOf(t, st)
	switch {
	case applied != want:
		t.Errorf("%s at %v: applied %v, want %v", status, version, applied, want)
	case want && after != status, !want && after != before:
		t.Errorf("%s at %v: status %q after, was %q", status, version, after, before)
	}
}

// statusOf reads sub_1's status, "" when it has no row.
func statusOf(t *testing.T, st dbtest.Store) string {
	t.Helper()
	var s string
	err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT status FROM subscriptions WHERE id = 'sub_1'`).Scan(&s)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplyIfNewerOverTimesOfAnotherZone: on SQLite, versions an earlier
// hookbox stored as text in the process's own zone (Tokyo here) are
// compared with new ones, written in UTC, as the instants they name: a
// newer state is applied and an older one refused. Compared as text, a
// state up to the zone's offset newer was refused (east of UTC), or older
// applied (west).
func TestApplyIfNewerOverTimesOfAnotherZone(t *testing.T) {
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	createVersioned(t, st, "TIMESTAMP WITH TIME ZONE")
	tokyo := time.FixedZone("JST", 9*3600)
	old := time.Date(2026, 11, 30, 9, 0, 0, 0, tokyo) // 00:00Z, as an earlier hookbox wrote it
	if err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO subscriptions (id, status, version) VALUES ($1, $2, $3)`, "sub_1", "trialing", old)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	applyVersioned(t, st, "canceled", old.Add(-time.Minute), false)
	applyVersioned(t, st, "active", old.Add(time.Hour), true)
	applyVersioned(t, st, "paused", old.Add(30*time.Minute).In(time.FixedZone("EST", -5*3600)), false)
	applyVersioned(t, st, "past_due", old.Add(time.Hour+time.Millisecond), true)
	// Stored as ISO 8601 text (by hand, or another program): read as such.
	if err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE subscriptions SET version = '2026-11-30T12:00:00+09:00' WHERE id = 'sub_1'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	applyVersioned(t, st, "unpaid", time.Date(2026, 11, 30, 2, 30, 0, 0, time.UTC), false)
	applyVersioned(t, st, "active", time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC), true)
}

// TestApplyIfNewerVersionOfAnotherType: a version whose type differs from
// the column's is refused with an error on both stores, never compared
// silently by type instead of value. SQLite keeps each value with its own
// type and orders every number before every text: an integer version in a
// TEXT column was kept as text, so version 10 was refused over version 9
// ("10" < "9"); a text version ("" from a missing field) in an INTEGER
// column was newer than every number, and every later integer version was
// refused, for good. PostgreSQL refused both with an error.
func TestApplyIfNewerVersionOfAnotherType(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE texts (id TEXT PRIMARY KEY, status TEXT, version TEXT)`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `CREATE TABLE numbers (id TEXT PRIMARY KEY, status TEXT, version BIGINT)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		id := "sub_1"
		apply := func(table string, version any) (bool, error) {
			var applied bool
			var applyErr error
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				applied, applyErr = effect.ApplyIfNewer(ctx, tx, table, "id", "version",
					map[string]any{"id": id, "status": fmt.Sprint("at ", version), "version": version})
				return nil // commit what it wrote, even after an error
			})
			if err != nil && applyErr == nil { // PostgreSQL commits no failed transaction
				t.Fatal(err)
			}
			return applied, applyErr
		}
		// Integers in a TEXT column: 10 after 9 must not be refused silently.
		if applied, err := apply("texts", "9"); err != nil || !applied {
			t.Fatalf("first text version: applied %v, %v", applied, err)
		}
		if applied, err := apply("texts", int64(10)); err == nil {
			t.Errorf("integer version 10 over text version 9 in a TEXT column: applied %v, no error; want an error", applied)
		}
		// Text in an INTEGER column, then integers.
		if applied, err := apply("numbers", int64(1)); err != nil || !applied {
			t.Fatalf("first integer version: applied %v, %v", applied, err)
		}
		if applied, err := apply("numbers", ""); err == nil {
			t.Errorf("empty text version over integer version 1 in an INTEGER column: applied %v, no error; want an error", applied)
		}
		if applied, err := apply("numbers", int64(2)); err != nil || !applied {
			t.Errorf("integer version 2 over 1: applied %v, %v; want true, nil", applied, err)
		}
		// A new row with a number in a TEXT column: refused, nothing written.
		id = "sub_2"
		if applied, err := apply("texts", int64(3)); err == nil {
			t.Errorf("integer version in a TEXT column, new row: applied %v, no error; want an error", applied)
		}
		var rows int
		if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM texts WHERE id = 'sub_2'`).Scan(&rows)
		}); err != nil || rows != 0 {
			t.Errorf("a refused integer version left %d rows (%v), want none", rows, err)
		}
		id = "sub_1"
		// Versions of the column's type still compare as before.
		if applied, err := apply("texts", "9"); err != nil || applied {
			t.Errorf("text version 9 again: applied %v, %v; want false, nil", applied, err)
		}
	})
}

// createNullable creates the table subscriptions whose status and
// version may be NULL, so that only ApplyIfNewer's own checks refuse a
// row.
func createNullable(t *testing.T, st dbtest.Store) {
	t.Helper()
	if err := st.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT, version BIGINT)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestApplyIfNewerRefusesNullVersion: a version that binds as NULL (a
// sql.NullInt64 that is not valid, a nil pointer) is refused like nil; it
// was written, and a row whose version is NULL is overwritten by any
// state, however old.
func TestApplyIfNewerRefusesNullVersion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		createNullable(t, st)
		for _, v := range []any{sql.NullInt64{}, (*int64)(nil)} {
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				_, err := effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
					map[string]any{"id": "sub_1", "status": "active", "version": v})
				return err
			})
			if err == nil {
				t.Errorf("a version %#v, which binds as NULL, was accepted", v)
			}
		}
	})
}

// TestApplyIfNewerNamesDifferingInCase: SQL folds unquoted names to one
// case, so a row naming a column twice in two cases ("id" and "ID") is
// refused on both stores. SQLite took both and wrote the row under "x",
// the key given as "ID", not "sub_1", silently; PostgreSQL refused it.
func TestApplyIfNewerNamesDifferingInCase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		createNullable(t, st)
		for _, row := range []map[string]any{
			{"id": "sub_1", "ID": "x", "status": "active", "version": int64(1)},
			{"id": "sub_1", "status": "active", "version": int64(1), "Version": int64(2)},
		} {
			var applied bool
			err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				var err error
				applied, err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version", row)
				return err
			})
			if err == nil {
				t.Errorf("row %v, naming a column twice: applied %v, no error; want an error", row, applied)
			}
		}
	})
}
