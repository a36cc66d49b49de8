package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

// PauseTarget pauses a queue name; see hookbox.Ops.
func (s *Store) PauseTarget(ctx context.Context, name, reason string) error {
	if err := hookbox.CheckPause(name, reason); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO paused_targets (name, reason) VALUES ($1, $2)
        ON CONFLICT (name) DO NOTHING`, name, reason); err != nil {
		return opError(ctx, fmt.Sprintf("pause %q", name), err)
	}
	return nil
}

// ResumeTarget lifts a pause; see hookbox.Ops.
func (s *Store) ResumeTarget(ctx context.Context, name string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM paused_targets WHERE name = $1`, name)
	if err != nil {
		return false, opError(ctx, fmt.Sprintf("resume %q", name), err)
	}
	return tag.RowsAffected() > 0, nil
}

// Paused lists the paused queue names in byte order; see hookbox.Queue.
// They are sorted here, not by the server, whose order is its
// collation's.
func (s *Store) Paused(ctx context.Context) ([]hookbox.Pause, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, paused_at, reason FROM paused_targets`)
	if err != nil {
		return nil, opError(ctx, "paused", err)
	}
	defer rows.Close()
	var out []hookbox.Pause
	for rows.Next() {
		var p hookbox.Pause
		if err := rows.Scan(&p.Name, &p.PausedAt, &p.Reason); err != nil {
			return nil, opError(ctx, "paused", err)
		}
		p.PausedAt = p.PausedAt.UTC()
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b hookbox.Pause) int { return strings.Compare(a.Name, b.Name) })
	return out, rows.Err()
}

// unfinishedNames walks queue_due from name to name: each step is one
// index seek past the last name, so the walk reads about one entry per
// name however many deliveries wait.
const unfinishedNames = `WITH RECURSIVE names(name) AS (
    (SELECT source FROM queue WHERE status IN ('pending', 'processing') ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT q.source FROM queue q WHERE q.status IN ('pending', 'processing') AND q.source > names.name
            ORDER BY q.source LIMIT 1)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name FROM names WHERE name IS NOT NULL`

// UnfinishedTargets lists the queue names with unfinished deliveries in
// byte order; see hookbox.Ops. The walk comes in the order of the
// database's collation (a language's, on many servers), so it is
// sorted here.
func (s *Store) UnfinishedTargets(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, unfinishedNames)
	if err != nil {
		return nil, opError(ctx, "unfinished targets", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, opError(ctx, "unfinished targets", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "unfinished targets", err)
	}
	slices.Sort(names)
	return names, nil
}

// TargetBacklog counts a queue name's unfinished deliveries; see
// hookbox.Ops. It reads the name's range of queue_due.
func (s *Store) TargetBacklog(ctx context.Context, name string, now time.Time) (hookbox.Backlog, error) {
	b := hookbox.Backlog{Name: name}
	var oldest *time.Time
	var at time.Time
	err := s.pool.QueryRow(ctx, targetBacklog, name, fromNow(now)).Scan(&b.Pending, &b.Processing, &oldest, &at)
	if err != nil {
		return b, opError(ctx, fmt.Sprintf("backlog of %q", name), err)
	}
	b.OldestDue, b.OldestDueAge = dueSince(oldest, at)
	return b, nil
}

// targetBacklog counts a queue name's ($1) unfinished deliveries and
// finds the oldest due one, due by $2 (the caller's now, as fromNow) on
// the database's clock, as statsDue does.
var targetBacklog = `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'processing'),
            min(next_attempt_at) FILTER (WHERE next_attempt_at <= ` + dbNow("$2::bigint") + `), ` + dbNow("$2::bigint") + `
        FROM queue WHERE source = $1 AND status IN ('pending', 'processing')`

// retireBatch is how many deliveries one RetireTarget statement ends.
const retireBatch = 1000

// retirable selects, among a queue name's rows ($1), the unfinished ones
// no live lease holds, on the database's clock (the one leases are
// judged by): pending, or processing with their lease ended.
const retirable = `source = $1 AND status IN ('pending', 'processing') AND (status = 'pending' OR next_attempt_at <= now())`

// retirePick picks up to $2 of a queue name's retirable deliveries,
// along queue_due, without locking them: retireOnce then locks them in id
// order, waiting for a transaction that holds one (a work transaction's
// pick, a replay), as the queue's statements lock, so it cannot deadlock
// with them. Skipping locked rows (SKIP LOCKED) left a delivery a work
// transaction had picked pending, neither ended nor counted in flight,
// once that transaction rolled back.
const retirePick = `SELECT id FROM queue WHERE ` + retirable + `
    ORDER BY next_attempt_at, id LIMIT $2`

// retireSlice ends those of the deliveries $3 (locked, by retireOnce)
// that are still retirable, with the last error $2, and marks each in its
// history (an attempts row by the operator, numbered as its last
// attempt).
const retireSlice = `WITH ended AS (
    UPDATE queue SET status = 'dead', lease_owner = NULL, last_error = $2, updated_at = now()
    WHERE id = ANY($3::bigint[]) AND ` + retirable + `
    RETURNING id, attempts, updated_at
), marked AS (
    INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
    SELECT id, attempts, '` + hookbox.OperatorOwner + `', '` + hookbox.AttemptDead + `', $2, updated_at, updated_at FROM ended ORDER BY id
)
SELECT count(*) FROM ended`

// retireOnce picks, locks and ends one slice in a transaction, and
// returns how many it picked and how many it ended.
func (s *Store) retireOnce(ctx context.Context, p hookbox.RetireParams) ([2]int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return [2]int{}, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, retirePick, p.Name, retireBatch)
	if err != nil {
		return [2]int{}, err
	}
	picked, err := rowscan.IDs(rows)
	if err != nil || len(picked) == 0 {
		return [2]int{}, err
	}
	if _, err := tx.Exec(ctx, replayLock, picked); err != nil {
		return [2]int{}, err
	}
	var ended int
	if err := tx.QueryRow(ctx, retireSlice, p.Name, p.Reason, picked).Scan(&ended); err != nil {
		return [2]int{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return [2]int{}, err
	}
	return [2]int{len(picked), ended}, nil
}

// RetireTarget ends a queue name's unfinished deliveries; see hookbox.Ops.
// It works in slices of retireBatch deliveries, each in a transaction of
// its own (retireOnce).
func (s *Store) RetireTarget(ctx context.Context, p hookbox.RetireParams) (hookbox.RetireResult, error) {
	var res hookbox.RetireResult
	op := fmt.Sprintf("retire %q", p.Name)
	if p.DryRun {
		ended, inFlight, err := s.retireCount(ctx, p.Name)
		if err != nil {
			return res, opError(ctx, op, err)
		}
		return hookbox.RetireResult{Ended: ended, InFlight: inFlight}, nil
	}
	for {
		n, err := runAgain(ctx, isDeadlock, func() ([2]int, error) { return s.retireOnce(ctx, p) })
		picked, ended := n[0], n[1]
		if err != nil {
			// The slices before this one have committed.
			return res, opError(ctx, op, err)
		}
		res.Ended += ended
		if p.Progress != nil {
			p.Progress(res.Ended)
		}
		if picked < retireBatch {
			break
		}
	}
	_, inFlight, err := s.retireCount(ctx, p.Name)
	if err != nil {
		return res, opError(ctx, op, err)
	}
	res.InFlight = inFlight
	return res, nil
}

// retireCount counts a queue name's deliveries RetireTarget would end now
// and those a live lease holds.
func (s *Store) retireCount(ctx context.Context, name string) (ended, inFlight int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+retirable+`),
            count(*) FILTER (WHERE status = 'processing' AND next_attempt_at > now())
        FROM queue WHERE source = $1 AND status IN ('pending', 'processing')`, name).Scan(&ended, &inFlight)
	return ended, inFlight, err
}
