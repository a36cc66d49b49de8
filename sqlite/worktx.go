package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// workTx is hookbox.WorkTx on SQLite. It holds the writer connection, and so
// the database's only write lock, from BeginWork to Commit or Rollback:
// nothing it picked or held can change under it meanwhile, which is why
// picked events need no lease and held ones are checked once.
type workTx struct {
	s  *Store
	tx *sql.Tx
	// uncached are the pick statements that had no prepared statement
	// yet (one per part of a pick over many sources); they are prepared
	// once the transaction has given the writer back.
	uncached []string
	// marked is the key of the mark this transaction wrote (Mark), dropped
	// once it commits.
	marked string
}

var _ hookbox.WorkTx = (*workTx)(nil)

// BeginWork opens a write transaction for Go handlers; see hookbox.Queue.
func (s *Store) BeginWork(ctx context.Context) (hookbox.WorkTx, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.explain(fmt.Errorf("sqlite: begin work: %w: %w", hookbox.ErrUnavailable, err))
	}
	return &workTx{s: s, tx: tx}, nil
}

// Pick reads the events a claim would lease; the write lock keeps them
// ours until the transaction ends. Their payloads are read here, whatever
// their size: the events are not leased, so only this transaction may
// read them as picked. A SELECT copies no row it reads; the payload is
// read once per event (see queuedColumns).
func (w *workTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, time.Time{}, nil
	}
	if p.Strict {
		return nil, time.Time{}, errors.New("sqlite: pick: strict claims must lease")
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	// Over more than maxUnion sources, part after part (see claimParts).
	var out []hookbox.Event
	var used int64 // payload bytes the parts before took
	for _, part := range splitSources(p) {
		if part.Limit -= len(out); part.Limit <= 0 || p.MaxPayloadBytes > 0 && used >= p.MaxPayloadBytes {
			break
		}
		pick, args, _, _ := claimPick(part)
		pick, args = payloadBudget(pick, args, p.MaxPayloadBytes, used)
		q := `SELECT ` + queuedColumns + ` FROM events WHERE id IN (` + pick + `)`
		// The writer is this transaction's: a statement cannot be prepared
		// on it now, so a new one runs unprepared this once.
		st := w.s.claims.lookup(q)
		if st == nil {
			w.uncached = append(w.uncached, q)
		}
		evs, err := pickTx(ctx, w.tx, st, q, args)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("sqlite: pick: %w", err)
		}
		for _, e := range evs {
			used += int64(len(e.Payload))
		}
		out = append(out, evs...)
	}
	sortByID(out)
	return out, fromMillis(millis(p.Now)), nil
}

// Repick checks, event by event, that each is still due and unworked.
func (w *workTx) Repick(ctx context.Context, evs []hookbox.Event) ([]bool, error) {
	now := millis(time.Now())
	ok := make([]bool, len(evs))
	for i, ev := range evs {
		var one int
		err := w.tx.QueryRowContext(ctx, `SELECT 1 FROM events
            WHERE id = ? AND attempts = ? AND status IN ('pending', 'processing') AND next_attempt_at <= ?`,
			ev.ID, ev.Attempts, now).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("sqlite: repick: %w", err)
		default:
			ok[i] = true
		}
	}
	return ok, nil
}

// Hold checks, event by event, that each is still leased as claimed. The
// write lock is ours for the whole transaction: a lease held now cannot be
// taken before we commit.
func (w *workTx) Hold(ctx context.Context, evs []hookbox.Event) ([]bool, error) {
	held := make([]bool, len(evs))
	for i, ev := range evs {
		var one int
		err := w.tx.QueryRowContext(ctx, `SELECT 1 FROM events
            WHERE id = ? AND lease_owner = ? AND status = 'processing'`, ev.ID, ev.LeaseOwner).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("sqlite: hold: %w", err)
		default:
			held[i] = true
		}
	}
	return held, nil
}

func (w *workTx) Tx(beforeFirst func(context.Context) error) *hookbox.Tx {
	return hookbox.NewTx(w.tx, hookbox.DialectSQLite, beforeFirst)
}

// The handler's savepoint has a name a handler's own savepoints will not
// take: one of theirs with the same name would hide it.
func (w *workTx) Savepoint(ctx context.Context) error { return w.exec(ctx, `SAVEPOINT hookbox_work`) }
func (w *workTx) Release(ctx context.Context) error   { return w.exec(ctx, `RELEASE hookbox_work`) }
func (w *workTx) RollbackTo(ctx context.Context) error {
	return w.exec(ctx, `ROLLBACK TO hookbox_work; RELEASE hookbox_work`)
}

func (w *workTx) exec(ctx context.Context, q string) error {
	_, err := w.tx.ExecContext(ctx, q)
	return err
}

// MaxKept is 0: SQLite keeps any number of released savepoints cheaply.
func (w *workTx) MaxKept() int { return 0 }

func (w *workTx) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	return w.s.finishTx(ctx, w.tx, outs, true)
}

func (w *workTx) FinishPicked(ctx context.Context, outs []hookbox.Outcome) error {
	_, err := w.s.finishTx(ctx, w.tx, outs, false)
	return err
}

func (w *workTx) LeasePicked(ctx context.Context, ids []int64, owner string, until, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{owner, millis(until), millis(at)}
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := w.tx.ExecContext(ctx, leaseIDs+placeholders(len(ids))+`)`, args...)
	return err
}

func (w *workTx) Commit(ctx context.Context) error {
	err := w.tx.Commit()
	w.prepareUncached(ctx)
	if err != nil {
		return w.s.explain(fmt.Errorf("sqlite: commit work: %w: %v", hookbox.ErrUnavailable, err))
	}
	if w.marked != "" {
		// The outcomes are committed: the mark has nothing left to charge.
		// A file left by a failed removal is replaced by the next mark or
		// dropped at a clean stop.
		w.s.DropMark(ctx, w.marked)
	}
	return nil
}

func (w *workTx) Rollback() error {
	err := w.tx.Rollback()
	w.prepareUncached(context.Background())
	return err
}

// prepareUncached prepares the pick statements that ran unprepared, for
// the next transactions; a failure only means one runs unprepared again.
func (w *workTx) prepareUncached(ctx context.Context) {
	for _, q := range w.uncached {
		w.s.claims.get(ctx, q)
	}
	w.uncached = nil
}
