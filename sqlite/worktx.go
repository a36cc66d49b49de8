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
// ours until the transaction ends. The events are not leased, so only
// this transaction may read them as picked: their payloads are read here,
// in two steps so that a pick holds no more than its budget
// (hookbox.ClaimParams.MaxPayloadBytes) and one payload: the pick reads
// the payloads of at most inTxPayload bytes and every size (from the
// rows' headers), keeps the events within the budget (withinBudget), and
// then reads the larger payloads of those it kept (pickLarge). A SELECT
// copies no row it reads; each payload is read once.
func (w *workTx) Pick(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, time.Time, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, time.Time{}, nil
	}
	if p.Strict {
		return nil, time.Time{}, errors.New("sqlite: pick: strict claims must lease")
	}
	if p.Limits != nil {
		return nil, time.Time{}, errors.New("sqlite: pick: limits per source are for claims")
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	// Over more than maxUnion sources, part after part (see claimParts).
	var out []hookbox.Event
	var large []int64
	var used int64 // payload bytes the parts before took
	for _, part := range splitSources(p) {
		if part.Limit -= len(out); part.Limit <= 0 || p.MaxPayloadBytes > 0 && used >= p.MaxPayloadBytes {
			break
		}
		pick, args, _, _ := claimPick(part)
		q := `SELECT ` + pickedColumns + ` FROM events WHERE id IN (` + pick + `)` + notPaused
		// The writer is this transaction's: a statement cannot be prepared
		// on it now, so a new one runs unprepared this once.
		st := w.s.claims.lookup(q)
		if st == nil {
			w.uncached = append(w.uncached, q)
		}
		evs, sizes, err := pickTx(ctx, w.tx, st, q, args)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("sqlite: pick: %w", err)
		}
		keep := withinBudget(sizes, p.MaxPayloadBytes, used)
		for i, e := range evs[:keep] {
			used += sizes[i]
			if e.Payload == nil && !e.PayloadCleared {
				large = append(large, e.ID)
			}
		}
		out = append(out, evs[:keep]...)
	}
	sortByID(out)
	if err := w.pickLarge(ctx, out, large); err != nil {
		return nil, time.Time{}, fmt.Errorf("sqlite: pick: %w", err)
	}
	return out, fromMillis(millis(p.Now)), nil
}

// pickLarge reads, in the transaction, the payloads larger than
// inTxPayload of the picked events evs whose ids are in large.
func (w *workTx) pickLarge(ctx context.Context, evs []hookbox.Event, large []int64) error {
	if len(large) == 0 {
		return nil
	}
	rows, err := w.tx.QueryContext(ctx, largeSQL, jsonArray(large))
	if err != nil {
		return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	byID := make(map[int64]*hookbox.Event, len(evs))
	for i := range evs {
		byID[evs[i].ID] = &evs[i]
	}
	for rows.Next() {
		var id int64
		var n sql.NullInt64
		var payload []byte
		if err := rows.Scan(&id, &n, (*driverBlob)(&payload)); err != nil {
			rows.Close()
			return err
		}
		if e := byID[id]; e != nil {
			// The write lock is ours: the payload cannot have been
			// cleared since the pick read its size.
			e.Payload = payload
		}
	}
	return closeRows(rows)
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
