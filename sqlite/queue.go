package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.Queue = (*Store)(nil)

// Claim leases due events; see hookbox.Queue.
func (s *Store) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	nowMS, until := millis(now), millis(now.Add(p.Lease))
	var pick string
	var args []any
	if p.Strict {
		pick = `SELECT id FROM events
            WHERE source = ? AND status IN ('pending', 'processing') AND next_attempt_at <= ?
              AND NOT EXISTS (SELECT 1 FROM events
                  WHERE source = ? AND status = 'processing' AND next_attempt_at > ?)
            ORDER BY id LIMIT 1`
		args = []any{p.Sources[0], nowMS, p.Sources[0], nowMS}
	} else {
		pick = `SELECT id FROM events
            WHERE status IN ('pending', 'processing') AND next_attempt_at <= ?
              AND source IN (` + placeholders(len(p.Sources)) + `)
            ORDER BY next_attempt_at, id LIMIT ?`
		args = append(args, nowMS)
		for _, src := range p.Sources {
			args = append(args, src)
		}
		args = append(args, p.Limit)
	}
	q := `UPDATE events SET status = 'processing', attempts = attempts + 1,
            lease_owner = ?, next_attempt_at = ?, updated_at = ?
        WHERE id IN (` + pick + `)
        RETURNING ` + eventColumns
	var out []hookbox.Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, append([]any{p.Owner, until, nowMS}, args...)...)
		if err != nil {
			return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	sortByID(out)
	return out, nil
}

// ExtendLeases moves the lease end of events still held by owner.
func (s *Store) ExtendLeases(ctx context.Context, owner string, ids []int64, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{millis(until), owner}
	for _, id := range ids {
		args = append(args, id)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE events SET next_attempt_at = ?
            WHERE lease_owner = ? AND status = 'processing' AND id IN (`+placeholders(len(ids))+`)`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: extend leases: %w", err)
	}
	return nil
}

// Finish applies outcomes; see hookbox.Queue.
func (s *Store) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	var errs []error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		errs, err = finishTx(ctx, tx, outs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: finish: %w", err)
	}
	return errs, nil
}

// Work runs fn for each event in one transaction; see hookbox.Queue.
func (s *Store) Work(ctx context.Context, evs []hookbox.Event, fn hookbox.WorkFunc) ([]hookbox.Outcome, []error, error) {
	outs := make([]hookbox.Outcome, 0, len(evs))
	var lost []int // indexes into evs whose lease had moved on
	var errs []error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		htx := &hookbox.Tx{Tx: tx, Dialect: hookbox.DialectSQLite}
		held, err := tx.PrepareContext(ctx, `SELECT 1 FROM events
            WHERE id = ? AND lease_owner = ? AND status = 'processing'`)
		if err != nil {
			return err
		}
		defer held.Close()
		for i := range evs {
			ev := &evs[i]
			var one int
			// The write lock is ours for the whole transaction: a lease
			// still held now cannot be taken before we commit.
			if err := held.QueryRowContext(ctx, ev.ID, ev.LeaseOwner).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				lost = append(lost, i)
				continue
			} else if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `SAVEPOINT work`); err != nil {
				return err
			}
			o := fn(ctx, htx, ev)
			if o.Status == hookbox.StatusDone {
				_, err = tx.ExecContext(ctx, `RELEASE work`)
			} else {
				_, err = tx.ExecContext(ctx, `ROLLBACK TO work; RELEASE work`)
			}
			if err != nil {
				return err
			}
			outs = append(outs, o)
		}
		errs, err = finishTx(ctx, tx, outs)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: work: %w", err)
	}
	return mergeLost(evs, outs, errs, lost)
}

// mergeLost returns outcomes and errors in the order of evs, with
// ErrLeaseLost for the events skipped before running.
func mergeLost(evs []hookbox.Event, outs []hookbox.Outcome, errs []error, lost []int) ([]hookbox.Outcome, []error, error) {
	if len(lost) == 0 {
		return outs, errs, nil
	}
	allOuts := make([]hookbox.Outcome, len(evs))
	allErrs := make([]error, len(evs))
	j, k := 0, 0
	for i := range evs {
		if k < len(lost) && lost[k] == i {
			allOuts[i] = hookbox.Outcome{ID: evs[i].ID, Owner: evs[i].LeaseOwner, Attempt: evs[i].Attempts}
			allErrs[i] = hookbox.ErrLeaseLost
			k++
			continue
		}
		allOuts[i], allErrs[i] = outs[j], errs[j]
		j++
	}
	return allOuts, allErrs, nil
}

// finishTx applies each outcome guarded by owner, attempt and status, and
// records the attempt.
func finishTx(ctx context.Context, tx *sql.Tx, outs []hookbox.Outcome) ([]error, error) {
	errs := make([]error, len(outs))
	if len(outs) == 0 {
		return errs, nil
	}
	upd, err := tx.PrepareContext(ctx, `UPDATE events
        SET status = ?, lease_owner = NULL, next_attempt_at = ?, last_error = ?, updated_at = ?
        WHERE id = ? AND lease_owner = ? AND attempts = ? AND status = 'processing'`)
	if err != nil {
		return nil, err
	}
	defer upd.Close()
	rec, err := tx.PrepareContext(ctx, `INSERT INTO attempts
        (event_id, attempt, owner, outcome, error, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	for i, o := range outs {
		if o.Status == "" {
			continue // not run (see hookbox.Queue.Work): nothing to apply
		}
		next := o.FinishedAt
		if o.Status == hookbox.StatusPending {
			next = o.RetryAt
		}
		var lastErr any
		if o.Error != "" {
			lastErr = o.Error
		}
		res, err := upd.ExecContext(ctx, string(o.Status), millis(next), lastErr, millis(o.FinishedAt),
			o.ID, o.Owner, o.Attempt)
		if err != nil {
			return nil, err
		}
		outcome := hookbox.AttemptOutcome(o.Status)
		if n, _ := res.RowsAffected(); n == 0 {
			errs[i] = hookbox.ErrLeaseLost
			outcome = hookbox.AttemptLost
		}
		if _, err := rec.ExecContext(ctx, o.ID, o.Attempt, o.Owner, outcome, lastErr,
			millis(o.StartedAt), millis(o.FinishedAt)); err != nil {
			if isForeignKey(err) {
				continue // the event was purged meanwhile
			}
			return nil, err
		}
	}
	return errs, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// Attempts lists the recorded attempts at one event, oldest first.
func (s *Store) Attempts(ctx context.Context, eventID int64) ([]hookbox.Attempt, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT attempt, owner, outcome, error, started_at, finished_at
        FROM attempts WHERE event_id = ? ORDER BY id`, eventID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempts: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Attempt
	for rows.Next() {
		var a hookbox.Attempt
		var msg sql.NullString
		var started, finished int64
		if err := rows.Scan(&a.Attempt, &a.Owner, &a.Outcome, &msg, &started, &finished); err != nil {
			return nil, fmt.Errorf("sqlite: attempts: %w", err)
		}
		a.Error, a.StartedAt, a.FinishedAt = msg.String, fromMillis(started), fromMillis(finished)
		out = append(out, a)
	}
	return out, rows.Err()
}

var _ hookbox.Transactor = (*Store)(nil)

// InTx runs fn in a write transaction; see hookbox.Transactor.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *hookbox.Tx) error) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		return fn(ctx, &hookbox.Tx{Tx: tx, Dialect: hookbox.DialectSQLite})
	})
}
