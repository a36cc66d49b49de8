package sqlite

import (
	"context"
	"testing"
	"time"
)

// TestStatementRowsOpenAtEnd: a handler prepares a statement through its
// Tx, queries it and returns with the rows open; its context then ends
// and the worker ends the Tx. End closed the statement under its open
// rows, and database/sql, closing the rows for the ended context, had
// SQLite's driver reset the freed statement: the process died (SIGSEGV).
// End leaves statements to the transaction, which closes them once their
// rows are closed.
func TestStatementRowsOpenAtEnd(t *testing.T) {
	s := openTemp(t)
	for range 20 {
		wt, err := s.BeginWork(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		htx := wt.Tx(nil)
		hctx, cancel := context.WithCancel(context.Background())
		st, err := htx.PrepareContext(hctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x FROM c`)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := st.QueryContext(hctx)
		if err != nil {
			t.Fatal(err)
		}
		rows.Next()
		cancel()  // the handler's context ends as it returns
		htx.End() // as the worker does
		// database/sql closes the rows for the ended context, on a
		// goroutine of its own: wait for that.
		for deadline := time.Now().Add(10 * time.Second); rows.Err() == nil; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the rows were not closed 10 s after their context ended")
			}
		}
		if err := wt.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}
