package sqlite_test

import (
	"context"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestInTxSwallowedLostTxNotReportedCommitted: fn writes a row, then a
// statement fails and ends SQLite's whole transaction (INSERT OR
// ROLLBACK); fn swallows it and returns nil. The row fn wrote is gone, and
// InTx says so (ErrTxLost): it committed the empty transaction that
// noticing the loss opened, and returned nil.
func TestInTxSwallowedLostTxNotReportedCommitted(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	ctx := context.Background()
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('ledger', 'wanted')`); err != nil {
			return err
		}
		// Swallowed: "already there" is fine for the caller.
		tx.ExecContext(ctx, `INSERT OR ROLLBACK INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
		return nil
	})
	var n int
	if qerr := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = 'ledger'`).Scan(&n)
	}); qerr != nil {
		t.Fatal(qerr)
	}
	if err == nil && n == 0 {
		t.Fatalf("InTx = nil (committed), but the row fn wrote before the failed statement is not in the database")
	}
}
