package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// PauseTarget pauses a queue name; see hookbox.Ops.
func (s *Store) PauseTarget(ctx context.Context, name, reason string) error {
	if err := hookbox.CheckPause(name, reason); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO paused_targets (name, paused_at, reason) VALUES (?, ?, ?)
            ON CONFLICT (name) DO NOTHING`, name, millis(time.Now()), reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: pause %q: %w", name, err)
	}
	return nil
}

// ResumeTarget lifts a pause; see hookbox.Ops.
func (s *Store) ResumeTarget(ctx context.Context, name string) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM paused_targets WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: resume %q: %w", name, err)
	}
	return n > 0, nil
}

// Paused lists the paused queue names; see hookbox.Queue.
func (s *Store) Paused(ctx context.Context) ([]hookbox.Pause, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT name, paused_at, reason FROM paused_targets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: paused: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Pause
	for rows.Next() {
		var p hookbox.Pause
		var at int64
		if err := rows.Scan(&p.Name, &at, &p.Reason); err != nil {
			return nil, fmt.Errorf("sqlite: paused: %w", err)
		}
		p.PausedAt = fromMillis(at)
		out = append(out, p)
	}
	return out, rows.Err()
}

// unfinishedNames walks events_due from name to name: each step is one
// seek to the first entry past the last name, so the walk reads about one
// entry per name however many deliveries wait.
const unfinishedNames = `WITH RECURSIVE names(name) AS (
    SELECT (SELECT min(source) FROM events INDEXED BY events_due WHERE status IN ('pending', 'processing'))
    UNION ALL
    SELECT (SELECT min(source) FROM events INDEXED BY events_due
        WHERE status IN ('pending', 'processing') AND source > names.name)
    FROM names WHERE name IS NOT NULL
)
SELECT name FROM names WHERE name IS NOT NULL`

// UnfinishedTargets lists the queue names with unfinished deliveries; see
// hookbox.Ops.
func (s *Store) UnfinishedTargets(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, unfinishedNames)
	if err != nil {
		return nil, fmt.Errorf("sqlite: unfinished targets: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite: unfinished targets: %w", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: unfinished targets: %w", err)
	}
	return names, nil
}

// TargetBacklog counts a queue name's unfinished deliveries; see
// hookbox.Ops. It reads the name's range of events_due.
func (s *Store) TargetBacklog(ctx context.Context, name string, now time.Time) (hookbox.Backlog, error) {
	b := hookbox.Backlog{Name: name}
	var oldest sql.NullInt64
	err := s.reader.QueryRowContext(ctx, `SELECT coalesce(sum(status = 'pending'), 0), coalesce(sum(status = 'processing'), 0),
            min(CASE WHEN next_attempt_at <= ?2 THEN next_attempt_at END)
        FROM events INDEXED BY events_due WHERE source = ?1 AND status IN ('pending', 'processing')`,
		name, millis(now)).Scan(&b.Pending, &b.Processing, &oldest)
	if err != nil {
		return b, fmt.Errorf("sqlite: backlog of %q: %w", name, err)
	}
	b.OldestDue = fromNullMillis(oldest)
	b.OldestDueAge = hookbox.DueAge(b.OldestDue, now)
	return b, nil
}

// retireBatch is how many deliveries one RetireTarget transaction ends.
const retireBatch = 1000

// retirable selects, among a queue name's rows (?1), the unfinished ones
// no live lease holds at ?2: pending, or processing with their lease
// ended.
const retirable = `source = ?1 AND status IN ('pending', 'processing') AND (status = 'pending' OR next_attempt_at <= ?2)`

// RetireTarget ends a queue name's unfinished deliveries; see hookbox.Ops.
// Each slice is picked on a reader, first along events_due (the rows it
// ends leave that index, so the next pick starts where this one ended)
// and judged again under the write lock, by id; a pause as long as the
// slice took comes between slices, as in Purge, so ingest waits behind at
// most one.
func (s *Store) RetireTarget(ctx context.Context, p hookbox.RetireParams) (hookbox.RetireResult, error) {
	var res hookbox.RetireResult
	if p.DryRun {
		ended, inFlight, err := s.retireCount(ctx, p.Name)
		if err != nil {
			return res, fmt.Errorf("sqlite: retire %q: %w", p.Name, err)
		}
		return hookbox.RetireResult{Ended: ended, InFlight: inFlight}, nil
	}
	for {
		start := time.Now()
		picked, err := queryIDs(ctx, s.reader, `SELECT id FROM events INDEXED BY events_due WHERE `+retirable+`
            ORDER BY next_attempt_at, id LIMIT ?3`, p.Name, millis(start), retireBatch)
		if err != nil {
			return res, fmt.Errorf("sqlite: retire %q: %w", p.Name, err)
		}
		if len(picked) == 0 {
			break
		}
		var n int
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			now := millis(time.Now())
			judge := `SELECT id FROM events NOT INDEXED WHERE ` + retirable + ` AND id IN (` + placeholders(len(picked)) + `)`
			ids, err := queryIDs(ctx, tx, judge, append([]any{p.Name, now}, int64sAny(picked)...)...)
			if err != nil || len(ids) == 0 {
				return err
			}
			in, idArgs := ` WHERE id IN (`+placeholders(len(ids))+`)`, int64sAny(ids)
			if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
                SELECT id, attempts, '`+hookbox.OperatorOwner+`', '`+hookbox.AttemptDead+`', ?, ?, ? FROM events`+in,
				append([]any{p.Reason, now, now}, idArgs...)...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE events SET status = 'dead', lease_owner = NULL, last_error = ?,
                    updated_at = ?`+in, append([]any{p.Reason, now}, idArgs...)...); err != nil {
				return err
			}
			n = len(ids)
			return nil
		})
		if err != nil {
			// The slices before this one have committed.
			return res, fmt.Errorf("sqlite: retire %q: %w", p.Name, err)
		}
		res.Ended += n
		if p.Progress != nil {
			p.Progress(res.Ended)
		}
		if len(picked) < retireBatch {
			break
		}
		if err := hookbox.Yield(ctx, time.Since(start)); err != nil {
			return res, fmt.Errorf("sqlite: retire %q: %w", p.Name, err)
		}
	}
	_, inFlight, err := s.retireCount(ctx, p.Name)
	if err != nil {
		return res, fmt.Errorf("sqlite: retire %q: %w", p.Name, err)
	}
	res.InFlight = inFlight
	return res, nil
}

// retireCount counts a queue name's deliveries RetireTarget would end now
// and those a live lease holds.
func (s *Store) retireCount(ctx context.Context, name string) (ended, inFlight int, err error) {
	err = s.reader.QueryRowContext(ctx, `SELECT coalesce(sum(`+retirable+`), 0),
            coalesce(sum(status = 'processing' AND next_attempt_at > ?2), 0)
        FROM events INDEXED BY events_due WHERE source = ?1 AND status IN ('pending', 'processing')`,
		name, millis(time.Now())).Scan(&ended, &inFlight)
	return ended, inFlight, err
}
