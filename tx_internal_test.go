package hookbox

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestTxControlStatementsRecognised: the statements that begin or end a
// transaction are recognised whatever their case and whatever white space
// and comments come before them, a rollback to a savepoint in any of its
// spellings is not, nor is any other statement. A handler's COMMIT went
// through its tx and committed other handlers' writes without their done.
func TestTxControlStatementsRecognised(t *testing.T) {
	for q, want := range map[string]string{
		"COMMIT":                           "COMMIT",
		"commit transaction":               "COMMIT",
		"  \n\tEnd;":                       "END",
		"-- finish\nCOMMIT":                "COMMIT",
		"/* a */ /* b */ rollback":         "ROLLBACK",
		"ROLLBACK WORK":                    "ROLLBACK",
		"ROLLBACK TRANSACTION":             "ROLLBACK",
		"ROLLBACK AND CHAIN":               "ROLLBACK",
		"BEGIN IMMEDIATE":                  "BEGIN",
		"START TRANSACTION":                "START",
		"abort":                            "ABORT",
		"ROLLBACK TO mine":                 "",
		"rollback to savepoint mine":       "",
		"ROLLBACK TRANSACTION TO mine":     "",
		"ROLLBACK /* undo */ WORK TO mine": "",
		"SAVEPOINT mine":                   "",
		"RELEASE SAVEPOINT mine":           "",
		"INSERT INTO t VALUES ('COMMIT')":  "",
		"SELECT 1; COMMIT":                 "", // the first statement only
		"-- COMMIT\nSELECT 1":              "",
		"/* unclosed COMMIT":               "",
		"UPDATE commits SET n = 1":         "",
		"DO $$ BEGIN PERFORM 1; END $$":    "",
		"CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END": "",
		"": "",
	} {
		if got := txControl(q); got != want {
			t.Errorf("txControl(%q) = %q, want %q", q, got, want)
		}
	}
}

// TestTxEndedRefusesEveryCall: once End has run, every method of a Tx
// fails with ErrTxEnded without reaching the database, QueryRowContext's
// Scan included, and beforeFirst (the handler's savepoint) is not run;
// rows the handler left open are closed (statements are left to the
// transaction: see TestStatementRowsOpenAtEnd in package sqlite).
func TestTxEndedRefusesEveryCall(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlTx.Rollback()
	savepoints := 0
	tx := NewTx(sqlTx, DialectSQLite, func(context.Context) error { savepoints++; return nil })
	rows, err := tx.QueryContext(ctx, `SELECT 1 UNION ALL SELECT 2`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "COMMIT"); !errors.Is(err, ErrTxControl) {
		t.Errorf("COMMIT: %v, want ErrTxControl", err)
	}
	tx.End()
	if rows.Next() {
		t.Errorf("rows left open by the handler still read after End")
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1`); !errors.Is(err, ErrTxEnded) {
		t.Errorf("ExecContext after End: %v, want ErrTxEnded", err)
	}
	if _, err := tx.QueryContext(ctx, `SELECT 1`); !errors.Is(err, ErrTxEnded) {
		t.Errorf("QueryContext after End: %v, want ErrTxEnded", err)
	}
	if _, err := tx.PrepareContext(ctx, `SELECT 1`); !errors.Is(err, ErrTxEnded) {
		t.Errorf("PrepareContext after End: %v, want ErrTxEnded", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT 1`).Scan(&n); !errors.Is(err, ErrTxEnded) || !errors.Is(err, context.Canceled) {
		t.Errorf("QueryRowContext after End: %v, want ErrTxEnded (as a cancelled query)", err)
	}
	if savepoints != 1 {
		t.Errorf("beforeFirst ran %d times, want once (before the first statement)", savepoints)
	}
}
