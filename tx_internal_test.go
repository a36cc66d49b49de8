package hookbox

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestTxEndedRefusesEveryCall: once End has run, every method of a Tx
// fails with ErrTxEnded without reaching the database, QueryRowContext's
// Scan included, and beforeFirst (the handler's savepoint) is not run;
// rows and statements the handler left open are closed.
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
	st, err := tx.PrepareContext(ctx, `SELECT 1`)
	if err != nil {
		t.Fatal(err)
	}
	tx.End()
	if rows.Next() {
		t.Errorf("rows left open by the handler still read after End")
	}
	if _, err := st.ExecContext(ctx); err == nil {
		t.Errorf("a statement the handler prepared still runs after End")
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
