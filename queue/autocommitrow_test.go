package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/queue"
	"github.com/hookbox/hookbox/storetest"
)

// TestSwallowedRollbackInQueryRowDoesNotAutocommit: as
// TestSwallowedRollbackDoesNotAutocommit, with the statement that ends the
// whole transaction run by QueryRowContext (INSERT ... RETURNING, the
// usual way to read back an id), its Scan error swallowed. The handler's
// later write is not committed on its own: the loss was noticed only for
// ExecContext and QueryContext, and the effect landed twice.
func TestSwallowedRollbackInQueryRowDoesNotAutocommit(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	ctx := context.Background()
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("app", "breaks")}); err != nil {
		t.Fatal(err)
	}
	r := queue.Runner{Queue: s, Charge: func(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome {
		return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDead, Error: err.Error()}
	}}
	runs := 0
	broke := false
	_, err := r.ClaimWork(ctx, hookbox.ClaimParams{Owner: "w-1", Limit: 1, Lease: time.Minute, Sources: []string{"app"}},
		func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
			runs++
			if !broke {
				broke = true
				var k string
				// Swallowed: the statement fails and takes the transaction with it.
				err := tx.QueryRowContext(ctx, `INSERT OR ROLLBACK INTO effect_keys (scope, key) VALUES ('test', 'taken') RETURNING key`).Scan(&k)
				t.Logf("swallowed: %v", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('ledger', $1)`, fmt.Sprint("run-", runs)); err != nil {
				return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusPending, Error: err.Error()}
			}
			return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDone}
		})
	if err != nil {
		t.Fatalf("ClaimWork: %v", err)
	}
	var n int
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = 'ledger'`).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the handler ran %d times and its effect is in the database %d times, want once (with the one outcome committed)", runs, n)
	}
}
