package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestDeadlockedHandlerNotCharged: a Go handler (apply-only, and the
// Apply of a two-phase one) whose UPDATE of the app's own table is chosen
// as the victim of a real deadlock with an outside transaction (rows
// locked in the opposite order, coordinated by channels) is given back,
// not charged: its writes, those made through package effect included,
// are rolled back with it, the next attempt runs clean and the event
// ends done with one attempt counted. Before, the deadlock was charged
// as the app's failure, and a busy app walked events to dead through
// nothing but lock conflicts.
func TestDeadlockedHandlerNotCharged(t *testing.T) {
	for _, phased := range []bool{false, true} {
		t.Run(map[bool]string{false: "apply-only", true: "two-phase"}[phased], func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.URL(t)
			s := dbtest.Open(t, dbURL)
			ctx := context.Background()
			if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				for _, q := range []string{
					`CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL)`,
					`INSERT INTO accounts VALUES (1, 0), (2, 0)`,
					`CREATE TABLE balances (id text PRIMARY KEY, version bigint NOT NULL, n int NOT NULL)`,
				} {
					if _, err := tx.ExecContext(ctx, q); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			outside, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { outside.Close(ctx) })

			handlerHolds1 := make(chan struct{})
			outsideHolds2 := make(chan struct{})
			var runs atomic.Int64
			var firstClaims [3]bool // what each effect reported on the attempt that ran clean
			handle := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				n := runs.Add(1)
				claimed, err := effect.ClaimKey(ctx, tx, ev, "order", "o-1")
				if err != nil {
					return err
				}
				applied, err := effect.ApplyIfNewer(ctx, tx, "balances", "id", "version", map[string]any{"id": "b-1", "version": int64(1), "n": 1})
				if err != nil {
					return err
				}
				sent, err := effect.RecordSend(ctx, tx, "email", "o-1", []byte(`{}`))
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE accounts SET n = n + 1 WHERE id = 1`); err != nil {
					return err
				}
				if n == 1 {
					close(handlerHolds1)
					<-outsideHolds2
				}
				if _, err := tx.ExecContext(ctx, `UPDATE accounts SET n = n + 1 WHERE id = 2`); err != nil {
					return fmt.Errorf("move the balance: %w", err)
				}
				firstClaims = [3]bool{claimed, applied, sent}
				return nil
			}

			// The outside transaction takes row 2, then waits for row 1.
			// Its deadlock_timeout is long, so that the handler's backend,
			// waiting with the default second, finds the deadlock and is
			// the victim.
			outsideDone := make(chan error, 1)
			go func() {
				outsideDone <- func() error {
					tx, err := outside.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(ctx)
					if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '60s'`); err != nil {
						return err
					}
					<-handlerHolds1
					if _, err := tx.Exec(ctx, `UPDATE accounts SET n = n + 10 WHERE id = 2`); err != nil {
						return err
					}
					close(outsideHolds2)
					if _, err := tx.Exec(ctx, `UPDATE accounts SET n = n + 10 WHERE id = 1`); err != nil {
						return err
					}
					return tx.Commit(ctx)
				}()
			}()

			p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
			if phased {
				p.HandlePhases("app", "", worker.Phases{
					Prepare: func(ctx context.Context, ev *hookbox.Event) (any, error) { return nil, nil },
					Apply: func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, _ any) error {
						return handle(ctx, tx, ev)
					},
				})
			} else {
				p.Handle("app", "", handle)
			}
			p.Route(effect.SendSource("email"), worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
			p.SetPolicy("app", fast)
			start(t, p)
			rs := ingest(t, s, storetest.Delivery("app", "1"))
			e := waitFinished(t, s, p, rs[0].ID)
			if err := <-outsideDone; err != nil {
				t.Fatalf("outside transaction: %v", err)
			}
			if e.Status != hookbox.StatusDone {
				t.Fatalf("event %s after %d runs, want done (last error %q)", e.Status, runs.Load(), e.LastError)
			}
			as, err := s.Attempts(ctx, rs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for _, a := range as {
				outcomes = append(outcomes, a.Outcome)
			}
			if len(as) != 2 || as[0].Outcome != hookbox.AttemptReleased || !strings.Contains(as[0].Error, "40P01") ||
				as[1].Outcome != hookbox.AttemptDone {
				t.Fatalf("attempts %v (first error %q), want the deadlock given back, then done", outcomes, as[0].Error)
			}
			if tries := e.Attempts - e.AttemptBase; tries != 1 {
				t.Errorf("%d attempts counted, want 1: the deadlock was charged", tries)
			}
			// The deadlocked attempt's effects were rolled back with it: the
			// attempt that ran clean made each of them for the first time.
			if firstClaims != [3]bool{true, true, true} {
				t.Errorf("on the clean attempt ClaimKey, ApplyIfNewer, RecordSend reported %v, want all first: the deadlocked attempt's effects were kept", firstClaims)
			}
			var n1, n2 int
			if err := outside.QueryRow(ctx, `SELECT (SELECT n FROM accounts WHERE id = 1), (SELECT n FROM accounts WHERE id = 2)`).Scan(&n1, &n2); err != nil {
				t.Fatal(err)
			}
			if n1 != 11 || n2 != 11 {
				t.Errorf("accounts hold %d and %d, want 11 and 11: the outside transaction's +10 and one run's +1 each", n1, n2)
			}
		})
	}
}

// TestConflictForeverIsCharged: a handler that meets a conflict on every
// attempt (here a real error with SQLSTATE 40001, raised by PostgreSQL
// in the handler's statement, which leaves hookbox's transaction aborted
// until its savepoint is rolled back) is given back a bounded number of
// times in a row, then charged: it ends dead after its attempts, never
// spinning for ever, and the shared transaction still records each
// outcome.
func TestConflictForeverIsCharged(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	var runs atomic.Int64
	p.Handle("app", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		runs.Add(1)
		_, err := tx.ExecContext(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict for the test' USING ERRCODE = 'serialization_failure'; END $$`)
		return fmt.Errorf("app step: %w", err)
	})
	pol := fast
	pol.MaxAttempts = 2
	p.SetPolicy("app", pol)
	start(t, p)
	rs := ingest(t, s, storetest.Delivery("app", "1"))
	e := waitFinished(t, s, p, rs[0].ID)
	if e.Status != hookbox.StatusDead {
		t.Fatalf("event %s, want dead", e.Status)
	}
	as, err := s.Attempts(context.Background(), rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	want := pol.MaxAttempts * (worker.MaxConflictsInARow + 1)
	released, failed := 0, 0
	for _, a := range as {
		switch a.Outcome {
		case hookbox.AttemptReleased:
			released++
		default:
			failed++
		}
	}
	if len(as) != want || released != pol.MaxAttempts*worker.MaxConflictsInARow || failed != pol.MaxAttempts {
		t.Errorf("%d attempts (%d given back, %d charged), want %d (%d given back, %d charged)",
			len(as), released, failed, want, pol.MaxAttempts*worker.MaxConflictsInARow, pol.MaxAttempts)
	}
	if !strings.Contains(e.LastError, "40001") {
		t.Errorf("last error %q does not name the conflict", e.LastError)
	}
	t.Logf("%d runs", runs.Load())
}

// TestSerializationFailureNotCharged: a handler whose statement fails
// with a serialization failure (40001; raised by PostgreSQL in the
// handler's statement here, since the READ COMMITTED transaction handlers
// run in no longer makes one of its own: see
// TestHandlerReadCommittedOnSerializableDatabase) lost a race: its
// attempt is given back, not charged, and run again it succeeds: the
// event is done with one attempt counted.
func TestSerializationFailureNotCharged(t *testing.T) {
	s := dbtest.Open(t, pgtest.URL(t))
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	var runs atomic.Int64
	p.Handle("app", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		if runs.Add(1) > 1 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `DO $$ BEGIN RAISE EXCEPTION 'lost a race' USING ERRCODE = 'serialization_failure'; END $$`)
		return err
	})
	p.SetPolicy("app", fast)
	start(t, p)
	rs := ingest(t, s, storetest.Delivery("app", "1"))
	e := waitFinished(t, s, p, rs[0].ID)
	if e.Status != hookbox.StatusDone {
		t.Fatalf("event %s after %d runs, want done (last error %q)", e.Status, runs.Load(), e.LastError)
	}
	as, err := s.Attempts(context.Background(), rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].Outcome != hookbox.AttemptReleased || !strings.Contains(as[0].Error, "40001") || as[1].Outcome != hookbox.AttemptDone {
		t.Errorf("attempts %+v, want the serialization failure given back, then done", as)
	}
	if tries := e.Attempts - e.AttemptBase; tries != 1 {
		t.Errorf("%d attempts counted, want 1", tries)
	}
}

// TestHandlerReadCommittedOnSerializableDatabase: on a database whose
// transactions are SERIALIZABLE by default, a handler still runs at READ
// COMMITTED (its statements run in hookbox's work transaction, which the
// store pins there: at SERIALIZABLE the queue's own statements failed
// with serialization failures). A handler whose UPDATE meets a row an
// outside transaction changed and committed after hookbox's transaction
// began therefore updates the committed row: before, it failed with a
// real serialization failure (40001) and the attempt was given back
// (the handling of a 40001 a handler does get is TestConflictForeverIsCharged's).
// The event is done at its first run, and both changes are kept.
func TestHandlerReadCommittedOnSerializableDatabase(t *testing.T) {
	plainURL := pgtest.URL(t)
	dbURL := plainURL + "&default_transaction_isolation=serializable"
	if !strings.Contains(plainURL, "?") {
		dbURL = plainURL + "?default_transaction_isolation=serializable"
	}
	s := dbtest.Open(t, dbURL)
	read := dbtest.Open(t, plainURL)
	ctx := context.Background()
	if err := read.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO accounts VALUES (1, 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	outside, err := pgx.Connect(ctx, plainURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Close(ctx) })

	var runs, conflicts atomic.Int64
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.Handle("app", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		var level string
		if err := tx.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil {
			return err
		}
		if level != "read committed" {
			return worker.Permanent(fmt.Errorf("handler runs at %s, want read committed", level))
		}
		if runs.Add(1) == 1 {
			// hookbox's transaction has begun (its pick read the
			// event); the outside change commits after that.
			if _, err := outside.Exec(ctx, `UPDATE accounts SET n = n + 10 WHERE id = 1`); err != nil {
				return worker.Permanent(fmt.Errorf("outside: %w", err))
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE accounts SET n = n + 1 WHERE id = 1`)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "40001" {
			conflicts.Add(1)
		}
		return err
	})
	p.SetPolicy("app", fast)
	start(t, p)
	rs := ingest(t, read, storetest.Delivery("app", "1"))
	e := waitFinished(t, read, p, rs[0].ID)
	if e.Status != hookbox.StatusDone {
		t.Fatalf("event %s after %d runs, want done (last error %q)", e.Status, runs.Load(), e.LastError)
	}
	if c := conflicts.Load(); c > 0 {
		t.Errorf("%d runs of %d met a serialization failure", c, runs.Load())
	}
	as, err := read.Attempts(ctx, rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Outcome != hookbox.AttemptDone {
		t.Errorf("attempts %+v, want one, done", as)
	}
	var n int
	if err := outside.QueryRow(ctx, `SELECT n FROM accounts WHERE id = 1`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 11 {
		t.Errorf("account holds %d, want 11", n)
	}
	t.Logf("%d runs, %d attempts recorded", runs.Load(), len(as))
}

// TestStatementCancelledFromOutsideNotCharged: a handler's statement that
// the database cancels while the attempt's own deadline is far off (a
// cancel request meant for an earlier statement of the shared
// transaction, which under load reaches the server after that statement
// ended, when the next handler's runs; or an operator's
// pg_cancel_backend) ends with SQLSTATE 57014 as a timed-out handler's
// does. It is not this handler's failure: the attempt is given back as a
// conflict's is, and the event is done with one attempt counted. Before,
// it was charged, and TestBadHandlersGoDeadAlone once saw a healthy event
// with two attempts on a loaded machine. A handler that runs past its own
// deadline is still charged (TestBadHandlersGoDeadAlone's "timeout").
func TestStatementCancelledFromOutsideNotCharged(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	ctx := context.Background()
	outside, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Close(ctx) })

	pids := make(chan int, 1)
	var runs, cancelled atomic.Int64
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.Handle("app", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		if runs.Add(1) > 1 {
			_, err := tx.ExecContext(ctx, `SELECT 1`)
			return err
		}
		var pid int
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		pids <- pid
		_, err := tx.ExecContext(ctx, `SELECT pg_sleep(60)`)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "57014" && ctx.Err() == nil {
			cancelled.Add(1)
		}
		return fmt.Errorf("app step: %w", err)
	})
	pol := fast
	pol.Timeout = time.Minute
	p.SetPolicy("app", pol)
	start(t, p)
	rs := ingest(t, s, storetest.Delivery("app", "1"))
	pid := <-pids
	// Cancel the handler's statement once the server runs it.
	for {
		var running bool
		if err := outside.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
            WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep%')`, pid).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var sent bool
	if err := outside.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, pid).Scan(&sent); err != nil || !sent {
		t.Fatalf("pg_cancel_backend(%d) = %v, %v", pid, sent, err)
	}
	e := waitFinished(t, s, p, rs[0].ID)
	if cancelled.Load() != 1 {
		t.Fatalf("the handler's statement was cancelled from outside %d times, want 1: the test did not do what it meant to", cancelled.Load())
	}
	if e.Status != hookbox.StatusDone {
		t.Fatalf("event %s after %d runs, want done (last error %q)", e.Status, runs.Load(), e.LastError)
	}
	as, err := s.Attempts(ctx, rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || as[0].Outcome != hookbox.AttemptReleased || !strings.Contains(as[0].Error, "57014") ||
		as[1].Outcome != hookbox.AttemptDone {
		t.Errorf("attempts %+v, want the cancelled one given back, then done", as)
	}
	if tries := e.Attempts - e.AttemptBase; tries != 1 {
		t.Errorf("%d attempts counted, want 1: a cancel this attempt did not ask for was charged", tries)
	}
}
