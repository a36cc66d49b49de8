package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hookbox/hookbox"
)

// workTx is hookbox.WorkTx on PostgreSQL: a database/sql transaction (the
// type handlers write through) whose row locks keep other processes off
// the events it picked or holds. Claims skip locked rows, and every lock is
// taken in id order, so work transactions cannot deadlock with each other
// or with finishes.
//
// Work transactions commit without waiting for the WAL flush (asyncCommit):
// one lost in a server crash only means its events run again, with their
// handlers' writes lost alongside, and any later synchronous commit (a
// claim, an ingest) flushes it. Acknowledged deliveries are never in one.
type workTx struct {
	s  *Store
	tx *sql.Tx
	// marked is the key of the mark written for this transaction (Mark),
	// emptied by its commit.
	marked string
}

var _ hookbox.WorkTx = (*workTx)(nil)

// asyncCommit makes the transaction's commit not wait for the WAL flush.
const asyncCommit = `SET LOCAL synchronous_commit = off`

// BeginWork opens a work transaction; see hookbox.Queue.
func (s *Store) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, unavailable(ctx, "begin work", err)
	}
	if _, err := tx.ExecContext(ctx, asyncCommit); err != nil {
		tx.Rollback()
		return nil, unavailable(ctx, "begin work", err)
	}
	return &workTx{s: s, tx: tx}, nil
}

// Pick locks due events without leasing them (pickDue).
func (w *workTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, time.Time{}, nil
	}
	if p.Strict {
		return nil, time.Time{}, errors.New("postgres: pick: strict claims must lease")
	}
	if p.Limits != nil {
		return nil, time.Time{}, errors.New("postgres: pick: limits per source are for claims")
	}
	var now any
	if !p.Now.IsZero() {
		now = p.Now
	}
	rows, err := w.tx.QueryContext(ctx, pickDue, append([]any{p.Owner, p.Lease.Microseconds(), now, p.Sources, p.Limit}, budgetArgs(p.MaxPayloadBytes, true)...)...)
	if err != nil {
		return nil, time.Time{}, unavailable(ctx, "pick", err)
	}
	defer rows.Close()
	var evs []hookbox.Event
	var at time.Time
	for rows.Next() {
		e, err := scanEvent(pickedRow{rows, &at})
		if err != nil {
			return nil, time.Time{}, unavailable(ctx, "pick", err)
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, unavailable(ctx, "pick", err)
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
	return evs, at, nil
}

// pickedRow reads a pickDue row: the event, then the pick's time into at
// (the owner and lease columns only keep pickDue's parameters typed, and
// the payload budget's columns are its own).
type pickedRow struct {
	rows *sql.Rows
	at   *time.Time
}

func (r pickedRow) Scan(dest ...any) error {
	var owner string
	var lease, upto, n int64
	return r.rows.Scan(append(dest, r.at, &owner, &lease, &upto, &n)...)
}

// repick locks, in id order, the events that are still due and whose
// attempt count is unchanged, skipping rows another transaction holds.
const repick = `SELECT e.id
FROM queue e JOIN unnest($1::bigint[], $2::integer[]) AS r(id, attempts)
    ON e.id = r.id AND e.attempts = r.attempts
WHERE e.status IN ('pending', 'processing') AND e.next_attempt_at <= now()
ORDER BY e.id
FOR NO KEY UPDATE OF e SKIP LOCKED`

func (w *workTx) Repick(ctx context.Context, evs []hookbox.Event) ([]bool, error) {
	ids := make([]int64, len(evs))
	attempts := make([]int32, len(evs))
	for i, ev := range evs {
		ids[i], attempts[i] = ev.ID, int32(ev.Attempts)
	}
	return w.lockIDs(ctx, "repick", repick, ids, attempts, evs)
}

// lockHeld locks, in id order, the rows of the events still leased to the
// owner they were claimed with, and returns them. A claim skips locked rows,
// so a lease held now cannot be taken over before the transaction ends.
const lockHeld = `SELECT e.id
FROM queue e JOIN unnest($1::bigint[], $2::text[]) AS h(id, owner)
    ON e.id = h.id AND e.lease_owner = h.owner
WHERE e.status = 'processing'
ORDER BY e.id
FOR NO KEY UPDATE OF e`

func (w *workTx) Hold(ctx context.Context, evs []hookbox.Event) ([]bool, error) {
	ids := make([]int64, len(evs))
	owners := make([]string, len(evs))
	for i, ev := range evs {
		ids[i], owners[i] = ev.ID, ev.LeaseOwner
	}
	return w.lockIDs(ctx, "hold", lockHeld, ids, owners, evs)
}

// lockIDs runs a locking query that returns event ids and reports, for each
// of evs, whether its id came back.
func (w *workTx) lockIDs(ctx context.Context, op, q string, ids, second any, evs []hookbox.Event) ([]bool, error) {
	rows, err := w.tx.QueryContext(ctx, q, ids, second)
	if err != nil {
		return nil, unavailable(ctx, op, err)
	}
	defer rows.Close()
	locked := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, unavailable(ctx, op, err)
		}
		locked[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(ctx, op, err)
	}
	out := make([]bool, len(evs))
	for i, ev := range evs {
		out[i] = locked[ev.ID]
	}
	return out, nil
}

func (w *workTx) Tx(beforeFirst func(context.Context) error) *hookbox.Tx {
	return hookbox.NewTx(w.tx, hookbox.DialectPostgres, beforeFirst)
}

// The handler's savepoint has a name a handler's own savepoints will not
// take: one of theirs with the same name would hide it.
func (w *workTx) Savepoint(ctx context.Context) error { return w.exec(ctx, `SAVEPOINT hookbox_work`) }
func (w *workTx) Release(ctx context.Context) error {
	return w.exec(ctx, `RELEASE SAVEPOINT hookbox_work`)
}

// RollbackTo also ends the aborted state a failed statement left.
func (w *workTx) RollbackTo(ctx context.Context) error {
	return w.exec(ctx, `ROLLBACK TO SAVEPOINT hookbox_work; RELEASE SAVEPOINT hookbox_work`)
}

func (w *workTx) exec(ctx context.Context, q string) error {
	_, err := w.tx.ExecContext(ctx, q)
	return err
}

// maxKeptSubtransactions caps the handlers whose writes one work
// transaction keeps. Each such handler ran under a savepoint that was
// released with its writes, which leaves a subtransaction id behind; a
// backend caches 64 of them, and past that every session's snapshots have
// to look subtransactions up on disk, which slows the whole server.
const maxKeptSubtransactions = 64

func (w *workTx) MaxKept() int { return maxKeptSubtransactions }

func (w *workTx) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	return w.finish(ctx, finishOutcomes, outs)
}

func (w *workTx) FinishPicked(ctx context.Context, outs []hookbox.Outcome) error {
	_, err := w.finish(ctx, finishPicked, outs)
	return err
}

func (w *workTx) finish(ctx context.Context, q string, outs []hookbox.Outcome) ([]error, error) {
	return applyOutcomes(outs, func(args []any) (rowScanner, func(), error) {
		rows, err := w.tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { rows.Close() }, nil
	})
}

func (w *workTx) LeasePicked(ctx context.Context, ids []int64, owner string, until, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := w.tx.ExecContext(ctx, leasePicked, owner, fromNow(until), ids, fromNow(at))
	return err
}

func (w *workTx) Commit(ctx context.Context) error {
	if w.marked != "" {
		if _, err := w.tx.ExecContext(ctx, clearMark, w.marked); err != nil {
			return unavailable(ctx, "commit work", err)
		}
	}
	if err := w.tx.Commit(); err != nil {
		return unavailable(ctx, "commit work", fmt.Errorf("%w", err))
	}
	return nil
}

func (w *workTx) Rollback() error { return w.tx.Rollback() }
