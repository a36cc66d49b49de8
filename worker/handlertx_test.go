package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// createEffects makes a table of effects without a unique key, where a
// write made twice shows twice.
func createEffects(t *testing.T, s dbtest.Store) {
	t.Helper()
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE effects (ev TEXT, what TEXT)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// effectCount counts the committed effects of event ev (its delivery id).
func effectCount(t *testing.T, s dbtest.Store, ev string) int {
	t.Helper()
	n := -1
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE ev = $1`, ev).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitEnded waits until event id is done or dead, failing after 20s.
func waitEnded(t *testing.T, s dbtest.Store, p *worker.Pool, id int64) hookbox.Event {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e, err := s.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDone || e.Status == hookbox.StatusDead {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s after 20s, want done or dead (last error %q)", id, e.Status, e.LastError)
		}
		p.Notify()
	}
}

// TestTxRefusedAfterItsHandlerReturned: a handler that hands its tx to a
// goroutine and fails gets nothing written through it after it returned:
// the goroutine's write, made while the next handler of the same
// transaction runs, fails with hookbox.ErrTxEnded, and the next handler's
// work is kept. The write used to go through, opening the failed
// handler's savepoint inside the next handler's turn, and commit.
func TestTxRefusedAfterItsHandlerReturned(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxBudget: 10 * time.Second})
		p.SetPolicy("shop", fast)
		bRunning := make(chan struct{})
		late := make(chan error, 1)
		var bRuns atomic.Int32
		p.Handle("shop", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.DeliveryID == "a" {
				go func() {
					<-bRunning
					_, err := claimKey(context.Background(), tx, "a-late")
					late <- err
				}()
				return worker.Permanent(errors.New("a fails"))
			}
			// b, after a in the same transaction.
			if bRuns.Add(1) == 1 {
				close(bRunning)
				if err := <-late; !errors.Is(err, hookbox.ErrTxEnded) {
					t.Errorf("a's write after its handler returned: %v, want hookbox.ErrTxEnded", err)
				}
			}
			_, err := claimKey(ctx, tx, "b")
			return err
		})
		rs := ingest(t, s, storetest.Delivery("shop", "a"), storetest.Delivery("shop", "b"))
		start(t, p)
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDead)
		if e := waitStatus(t, s, p, rs[1].ID, hookbox.StatusDone); e.Attempts != 1 {
			t.Errorf("b done after %d attempts, want 1", e.Attempts)
		}
		if n := keyCount(t, s, p, "a-late"); n != 0 {
			t.Errorf("a is dead, yet its write after returning committed")
		}
		if n := keyCount(t, s, p, "b"); n != 1 {
			t.Errorf("b is done with %d writes, want 1", n)
		}
	})
}

// TestLateWriteLeavesTheNextHandlersSavepointAlone: a handler that
// succeeds and writes through its tx later, in the middle of the next
// handler's turn, cannot open a savepoint there. That savepoint split the
// next handler's: when it failed, the rollback stopped at the late one,
// its failed attempt's write committed, and its retry wrote again (an
// event done once with its effect twice).
func TestLateWriteLeavesTheNextHandlersSavepointAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		createEffects(t, s)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxBudget: 10 * time.Second})
		p.SetPolicy("shop", fast)
		bWrote := make(chan struct{})
		late := make(chan error, 1)
		var bRuns atomic.Int32
		p.Handle("shop", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.DeliveryID == "a" {
				go func() {
					<-bWrote
					_, err := tx.ExecContext(context.Background(), `INSERT INTO effects VALUES ('a', 'late')`)
					late <- err
				}()
				return nil // done, having written nothing itself
			}
			n := bRuns.Add(1)
			if _, err := tx.ExecContext(ctx, `INSERT INTO effects VALUES ('b', 'x')`); err != nil {
				return err
			}
			if n > 1 {
				return nil
			}
			close(bWrote)
			if err := <-late; !errors.Is(err, hookbox.ErrTxEnded) {
				t.Errorf("a's write after its handler returned: %v, want hookbox.ErrTxEnded", err)
			}
			return errors.New("b fails its first attempt, after its write")
		})
		rs := ingest(t, s, storetest.Delivery("shop", "a"), storetest.Delivery("shop", "b"))
		start(t, p)
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		if e := waitStatus(t, s, p, rs[1].ID, hookbox.StatusDone); e.Attempts != 2 {
			t.Errorf("b done after %d attempts, want 2", e.Attempts)
		}
		if n := effectCount(t, s, "b"); n != 1 {
			t.Errorf("b done once, its handler ran %d times, and %d of its writes committed; want 1 (the failed attempt's rolled back)", bRuns.Load(), n)
		}
		if n := effectCount(t, s, "a"); n != 0 {
			t.Errorf("a's write after returning committed")
		}
	})
}

// leaveRowsOpen is a handler that writes its event's key, then reads the
// first row of a 1,000-row query and returns without closing its rows.
func leaveRowsOpen(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
	if _, err := claimKey(ctx, tx, "open-"+ev.DeliveryID); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT x FROM c`)
	if err != nil {
		return err
	}
	rows.Next() // the first row only, and no Close
	return nil
}

// TestRowsLeftOpenAreClosed: handlers that return without closing the
// *sql.Rows of a query they read one row of are done after one attempt,
// their writes kept. On PostgreSQL the open rows made the release of the
// handler's savepoint fail ("conn busy"): the handler was taken for one
// that broke its transaction, run again alone, and ended dead.
func TestRowsLeftOpenAreClosed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("shop", fast)
		p.Handle("shop", "", leaveRowsOpen)
		rs := ingest(t, s, storetest.Delivery("shop", "a"), storetest.Delivery("shop", "b"))
		start(t, p)
		for _, r := range rs {
			e := waitEnded(t, s, p, r.ID)
			if e.Status != hookbox.StatusDone || e.Attempts != 1 {
				t.Errorf("%s %s after %d attempts (last error %q), want done after 1", e.DeliveryID, e.Status, e.Attempts, e.LastError)
				continue
			}
			if n := keyCount(t, s, p, "open-"+e.DeliveryID); n != 1 {
				t.Errorf("%s done, yet its write is not kept", e.DeliveryID)
			}
		}
	})
}

// TestHandlerCannotEndTheTransaction: a COMMIT through a handler's tx is
// refused with hookbox.ErrTxControl, so a handler that ignores the error
// and returns nil commits its writes with its done, and the handler that
// ran before it in the same transaction is done once. The COMMIT used to
// go through: it committed the earlier handler's write without its done
// mark, the transaction's end failed, and that handler ran, and wrote,
// again.
func TestHandlerCannotEndTheTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		createEffects(t, s)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, TxBudget: 10 * time.Second})
		p.SetPolicy("shop", fast)
		var bRuns atomic.Int32
		commitErr := make(chan error, 1)
		p.Handle("shop", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if ev.DeliveryID == "b" {
				bRuns.Add(1)
				_, err := tx.ExecContext(ctx, `INSERT INTO effects VALUES ('b', 'x')`)
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO effects VALUES ('a', 'x')`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "  -- done here\n/* really */ COMMIT")
			select {
			case commitErr <- err:
			default:
			}
			return nil
		})
		rs := ingest(t, s, storetest.Delivery("shop", "b"), storetest.Delivery("shop", "a"))
		start(t, p)
		for _, r := range rs {
			if e := waitEnded(t, s, p, r.ID); e.Status != hookbox.StatusDone || e.Attempts != 1 {
				t.Errorf("%s %s after %d attempts (last error %q), want done after 1", e.DeliveryID, e.Status, e.Attempts, e.LastError)
			}
		}
		if err := <-commitErr; !errors.Is(err, hookbox.ErrTxControl) {
			t.Errorf("COMMIT through tx: %v, want hookbox.ErrTxControl", err)
		}
		if n := bRuns.Load(); n != 1 {
			t.Errorf("b's handler ran %d times, want 1", n)
		}
		for _, ev := range []string{"a", "b"} {
			if n := effectCount(t, s, ev); n != 1 {
				t.Errorf("%s: %d effects committed, want 1", ev, n)
			}
		}
	})
}

// TestHandlersOwnSavepointNamedWork: a handler that fails with a
// savepoint of its own left open, named work, has all its writes rolled
// back. The pool's savepoint was named work too: the rollback stopped at
// the handler's, and the write made before it committed with the failed
// event.
func TestHandlersOwnSavepointNamedWork(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("shop", fast)
		p.Handle("shop", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if _, err := claimKey(ctx, tx, "before-work"); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `SAVEPOINT work`); err != nil {
				return err
			}
			return worker.Permanent(errors.New("fails with its savepoint open"))
		})
		rs := ingest(t, s, storetest.Delivery("shop", "a"))
		start(t, p)
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDead)
		if n := keyCount(t, s, p, "before-work"); n != 0 {
			t.Errorf("the failed handler's write committed")
		}
	})
}
