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

// TestSwallowedRollbackDoesNotAutocommit: on SQLite a failed statement can
// end the whole transaction (INSERT OR ROLLBACK, a trigger's
// RAISE(ROLLBACK), SQLITE_FULL/IOERR/BUSY). A handler that swallows that
// failure and writes on does not have those writes committed on their own
// (autocommit), apart from its event's outcome: they were, the event ran
// again, and its effect landed twice.
func TestSwallowedRollbackDoesNotAutocommit(t *testing.T) {
	swallowedRollback(t, func(ctx context.Context, tx *hookbox.Tx) {
		tx.ExecContext(ctx, `INSERT OR ROLLBACK INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
	})
}

// TestSwallowedRollbackInQueryRowDoesNotAutocommit: as
// TestSwallowedRollbackDoesNotAutocommit, with the statement that ends the
// whole transaction run by QueryRowContext (INSERT ... RETURNING, the
// usual way to read back an id), its Scan error swallowed: the loss was
// noticed only for ExecContext and QueryContext, and the effect landed
// twice.
func TestSwallowedRollbackInQueryRowDoesNotAutocommit(t *testing.T) {
	swallowedRollback(t, func(ctx context.Context, tx *hookbox.Tx) {
		var k string
		tx.QueryRowContext(ctx, `INSERT OR ROLLBACK INTO effect_keys (scope, key) VALUES ('test', 'taken') RETURNING key`).Scan(&k)
	})
}

// swallowedRollback runs, on SQLite, a batch of two events whose first
// handler, on its first run only, calls swallow (a statement that fails
// and ends the whole transaction, its error ignored) and then writes its
// effect; it fails the test unless the effect is stored once.
func swallowedRollback(t *testing.T, swallow func(ctx context.Context, tx *hookbox.Tx)) {
	t.Helper()
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	ctx := context.Background()
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'taken')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("app", "breaks"), storetest.Delivery("app", "other")}); err != nil {
		t.Fatal(err)
	}
	r := queue.Runner{Queue: s, Charge: func(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome {
		return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDead, Error: err.Error()}
	}}
	runs := 0
	res, err := r.ClaimWork(ctx, hookbox.ClaimParams{Owner: "w-1", Limit: 2, Lease: time.Minute, Sources: []string{"app"}},
		func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
			done := hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDone}
			if ev.DeliveryID != "breaks" {
				return done
			}
			if runs++; runs == 1 {
				swallow(ctx, tx)
			}
			// The handler's effect, which must commit with its outcome only.
			if _, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('ledger', $1)`, fmt.Sprint("run-", runs)); err != nil {
				return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusPending, Error: err.Error()}
			}
			return done
		})
	if err != nil {
		t.Fatalf("ClaimWork: %v", err)
	}
	for _, r := range res {
		t.Logf("%s: %s %v", r.Event.DeliveryID, r.Outcome.Status, r.Err)
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
