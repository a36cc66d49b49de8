package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

// The operator side of the store. As in the queue, every statement names the
// states it may touch in its own WHERE clause, so it cannot move an event a
// worker holds; statements that may wait for row locks take them in id
// order, so they cannot deadlock with the queue's statements.

var (
	_ hookbox.Ops        = (*Store)(nil)
	_ hookbox.Transactor = (*Store)(nil)
)

// replayable lists the states a replay may move from.
func replayable(includeDone bool) string {
	if includeDone {
		return `('dead', 'pending', 'done')`
	}
	return `('dead', 'pending')`
}

// Replay sends events back to pending; see hookbox.Ops. It works in slices
// of replayBatch events, each a transaction (replaySlice): the queue rows
// are locked in id order, and the states are checked again on the locked
// rows, so an event claimed meanwhile is left alone. With a zero
// p.Now the events become due at the server's time, the clock claims use.
// Filter.Limit is not applied: every matching event is replayed. Only
// events above p.AfterID are.
func (s *Store) Replay(ctx context.Context, p hookbox.ReplayParams) (hookbox.ReplayResult, error) {
	var where string
	var args []any
	if len(p.IDs) > 0 {
		// A FanOut event named is replayed as its deliveries.
		where, args = ` WHERE (id = ANY($1::bigint[]) OR parent_id = ANY($1::bigint[]))`, []any{p.IDs}
		if expIDs, expN := p.Expected(); len(expIDs) > 0 {
			where += ` AND ` + expectEvents
			args = append(args, expIDs, expN)
		}
	} else {
		where, args = filterSQL(p.Filter)
	}
	states := `NOT fanout AND status IN ` + replayable(p.IncludeDone)
	if p.AfterID > 0 {
		args = append(args, p.AfterID)
		states += ` AND id > $` + strconv.Itoa(len(args))
	}
	if where == "" {
		where = ` WHERE ` + states
	} else {
		where += ` AND ` + states
	}
	var res hookbox.ReplayResult
	if p.DryRun {
		if err := s.replayDryRun(ctx, `SELECT id, payload IS NULL FROM events`+where+` ORDER BY id`, args, &res); err != nil {
			return res, opError(ctx, "replay", err)
		}
	} else {
		var now any
		if !p.Now.IsZero() {
			now = p.Now
		}
		// In id order, replayBatch events per transaction, so a replay of
		// a million events never holds a million row locks.
		n := len(args)
		pick := `SELECT id FROM events` + where + ` AND payload IS NOT NULL AND id > $` + strconv.Itoa(n+1) +
			` ORDER BY id LIMIT $` + strconv.Itoa(n+2)
		set, setArgs := replaySet(replayable(p.IncludeDone), false), []any{now}
		if expIDs, expN := p.Expected(); len(expIDs) > 0 {
			set, setArgs = replaySet(replayable(p.IncludeDone), true), []any{now, expIDs, expN}
		}
		// seen counts the events picked by the slices before, and by the
		// replay this one goes on from, for the pace (ReplayWait).
		seen := min(max(p.PaceAfter, 0), hookbox.MaxPaceAfter)
		res.PacedCount = seen
		wait := func(i int) time.Duration { return p.ReplayWait(seen + i) }
		for after := max(p.AfterID, 0); ; {
			picked, err := s.replaySlice(ctx, pick, append(args[:n:n], after, replayBatch), set, setArgs, wait, &res)
			if err != nil {
				// The slices before this one have committed: say where
				// they end, for a replay that goes on from there.
				res.ResumeAfter = &after
				slices.Sort(res.Replayed)
				return res, opError(ctx, "replay", err)
			}
			seen += len(picked)
			res.PacedCount = seen
			if p.Progress != nil {
				p.Progress(len(res.Replayed))
			}
			if len(picked) < replayBatch {
				break
			}
			after = picked[len(picked)-1]
		}
	}
	if !p.DryRun {
		// Events without a payload are never replayed, so they are still
		// in the state that matched: find them after the update.
		var err error
		if res.NoPayload, err = s.clearedIDs(ctx, where, args); err != nil {
			return res, opError(ctx, "replay", err)
		}
	}
	slices.Sort(res.Replayed)
	var parents, deliveries []int64
	if len(p.IDs) > 0 && len(res.Replayed) > 0 {
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT parent_id FROM events
            WHERE parent_id IS NOT NULL AND id = ANY($1::bigint[])`, res.Replayed)
		if err == nil {
			parents, err = rowscan.IDs(rows)
		}
		if err != nil {
			return res, opError(ctx, "replay", err)
		}
	}
	if len(p.IDs) > 0 {
		// Every delivery of a named FanOut event: those the replay left
		// alone (in flight, done, changed) are reported by their own id.
		rows, err := s.pool.Query(ctx, `SELECT id FROM event_data
            WHERE parent_id IS NOT NULL AND parent_id = ANY($1::bigint[]) ORDER BY id`, p.IDs)
		if err == nil {
			deliveries, err = rowscan.IDs(rows)
		}
		if err != nil {
			return res, opError(ctx, "replay", err)
		}
	}
	res.Skipped = hookbox.ReplaySkipped(p.IDs, res.Replayed, res.NoPayload, parents, deliveries)
	return res, nil
}

// expectEvents is the condition hookbox.ReplayParams.Expect puts on the
// rows of a replay of named events, over the events view, with the
// expected ids as $2 and their attempts as $3 (ReplayParams.Expected): a
// named event only while its attempts are the number expected, a delivery
// of a named FanOut event only while the sum of its event's deliveries'
// attempts is (hookbox.ReplayAttempts). replaySet checks the same on the locked rows,
// in the statement that replays them.
const expectEvents = `NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::bigint[]) x(id, n)
    WHERE (x.id = events.id AND events.attempts <> x.n)
       OR (x.id = events.parent_id AND (SELECT coalesce(sum(c.attempts), 0) FROM events c
            WHERE c.parent_id = x.id) <> x.n))`

// replayBatch is how many events one replay transaction changes.
const replayBatch = 1000

// replayDryRun adds the events q (the dry run's query) lists to res.
func (s *Store) replayDryRun(ctx context.Context, q string, args []any, res *hookbox.ReplayResult) error {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var cleared bool
		if err := rows.Scan(&id, &cleared); err != nil {
			return err
		}
		if cleared {
			res.NoPayload = append(res.NoPayload, id)
		} else {
			res.Replayed = append(res.Replayed, id)
		}
	}
	return rows.Err()
}

// replayLock locks, in id order, the queue rows of the events a replay
// slice picked.
const replayLock = `SELECT id FROM queue WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE`

// replaySet replays the events $1 that are still in one of the states
// (a list for IN) and still hold their payload, due at $2 (NULL: the
// server's time, the clock claims use) plus the wait the last argument
// gives each (microseconds, an array in $1's order: the replay's pace,
// hookbox.ReplayParams.ReplayWait). It runs after replayLock in the
// same transaction, so its snapshot, taken once every lock is held, sees
// a payload cleared by a ClearPayloads that held a row first: checked in
// the snapshot of a statement that waited for the lock, it would not be.
//
// The replay is marked in each event's history (an attempts row numbered
// as the last attempt before it), after the row of a first attempt that
// succeeded, which had none (hookbox.AttemptStored) and is read from the
// snapshot the update rewrites.
//
// With expect, it also checks hookbox.ReplayParams.Expect, with the
// expected ids as $3 and their attempts as $4 (Expected), in the same
// statement as the states: the rows it changes are locked, and the sum
// over a FanOut event's deliveries is read once every lock is held.
func replaySet(states string, expect bool) string {
	cond, waits := ``, `$3`
	if expect {
		waits = `$5`
		cond = `
  AND NOT EXISTS (SELECT 1 FROM unnest($3::bigint[], $4::bigint[]) x(id, n)
    WHERE (x.id = queue.id AND queue.attempts <> x.n)
       OR (x.id = (SELECT d.parent_id FROM event_data d WHERE d.id = queue.id)
           AND (SELECT coalesce(sum(c.attempts), 0) FROM queue c
                WHERE c.id = ANY (ARRAY(SELECT e.id FROM event_data e WHERE e.parent_id = x.id))) <> x.n))`
	}
	return `WITH replayed AS (
UPDATE queue SET status = 'pending', attempt_base = attempts,
    next_attempt_at = COALESCE($2::timestamptz, now())
        + (` + waits + `::bigint[])[array_position($1::bigint[], queue.id)] * interval '1 microsecond',
    lease_owner = NULL, last_error = NULL, updated_at = COALESCE($2::timestamptz, now())
WHERE id = ANY($1::bigint[]) AND NOT fanout AND status IN ` + states + `
  AND EXISTS (SELECT 1 FROM event_data d WHERE d.id = queue.id AND d.payload IS NOT NULL)` + cond + `
RETURNING id, attempts, updated_at
), marked AS (
INSERT INTO attempts (event_id, attempt, owner, outcome, started_at, finished_at)
SELECT id, attempt, owner, outcome, started_at, finished_at FROM (
    SELECT events.id, 0 AS k, 1 AS attempt, '' AS owner, '` + hookbox.AttemptDone + `' AS outcome,
        events.updated_at AS started_at, events.updated_at AS finished_at
    FROM events JOIN replayed r ON r.id = events.id WHERE ` + impliedFirstAttempt + `
    UNION ALL
    SELECT id, 1, attempts, '` + hookbox.OperatorOwner + `', '` + hookbox.AttemptReplay + `', updated_at, updated_at FROM replayed) m
ORDER BY id, k
)
SELECT id FROM replayed`
}

// replaySlice replays, in one transaction, the events pick (a query over
// args) lists: it locks their queue rows (replayLock), then replays those
// still replayable (set, a replaySet, over the ids picked, setArgs and
// the wait of each: wait(i) for the i-th picked). It adds the replayed
// ids to res and returns the ids picked.
//
// A slice that loses a deadlock (with a purge batch, whose locks are not
// all in id order: see purgeLock) changed nothing and is run again, picked
// and judged afresh (runAgain). Without it a replay failed part way, after
// the slices before had committed.
func (s *Store) replaySlice(ctx context.Context, pick string, args []any, set string, setArgs []any, wait func(int) time.Duration, res *hookbox.ReplayResult) ([]int64, error) {
	return runAgain(ctx, isDeadlock, func() ([]int64, error) {
		return s.replaySliceTx(ctx, pick, args, set, setArgs, wait, res)
	})
}

// isDeadlock reports whether the server ended a transaction as the victim
// of a deadlock (SQLSTATE 40P01): it was rolled back and may be run again.
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeDeadlockDetected
}

// replaySliceTx is one attempt of replaySlice.
func (s *Store) replaySliceTx(ctx context.Context, pick string, args []any, set string, setArgs []any, wait func(int) time.Duration, res *hookbox.ReplayResult) ([]int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, pick, args...)
	if err != nil {
		return nil, err
	}
	picked, err := rowscan.IDs(rows)
	if err != nil || len(picked) == 0 {
		return nil, err
	}
	if _, err := tx.Exec(ctx, replayLock, picked); err != nil {
		return nil, err
	}
	waits := make([]int64, len(picked))
	for i := range picked {
		waits[i] = wait(i).Microseconds()
	}
	if rows, err = tx.Query(ctx, set, slices.Concat([]any{picked}, setArgs, []any{waits})...); err != nil {
		return nil, err
	}
	replayed, err := rowscan.IDs(rows)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	res.Replayed = append(res.Replayed, replayed...)
	return picked, nil
}

// clearedIDs lists, in id order, the events matching where (a WHERE clause
// over args) whose payload was cleared.
func (s *Store) clearedIDs(ctx context.Context, where string, args []any) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM events`+where+` AND payload IS NULL ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rowscan.IDs(rows)
}

// purgeBatch deletes the purgeable events among the ids $2 (a slice
// purgeWalk read): their queue rows first (the rows every other statement
// locks), then their data. The condition is one CASE on purpose: the
// planner cannot match it to a partial index, so it reads the slice's rows
// by primary key. Both tables are restricted to the slice: with the queue
// alone, the plan was a hash join over a scan of all of event_data (55 ms
// a batch at 200k rows, growing with the table). Written
// plainly, a plan made from statistics that lag a bulk change (they said no
// row was done) drove the batch from the index of finished rows through
// every purgeable row: 0.7 to 1.3 s a batch at 300k to 1M rows, against
// 15 ms. A row changed meanwhile (a replay) is judged again on its new
// version before it is deleted.
//
// An event's deliveries (rows whose parent_id is its id) go in the same
// statement, found by index with = ANY of an array (a plan that does not
// depend on the CTE's row estimate); the statement returns every row it
// deleted, with the status of the events and NULL for their deliveries.
// An event's status is the one an operator reads (purgedStatus): stored
// for a FanOut event with no deliveries (a store_only source's), dead for
// one with a dead delivery. The main query sees event_data and queue as
// they were before the statement, so its deliveries, deleted by kids and
// data, are still there to be read.
// There are no foreign keys to cascade (migration 00009): purgeAttempts
// follows in the same transaction.
//
// The deliveries are judged in the statement's snapshot only (through
// purgeable's EXISTS): kids deletes by id, and a row it had to wait for is
// judged again on that id alone. purgeLock runs first for that reason.
//
// keys claims in effect_keys the key of every send the batch deletes,
// from the rows data returns (a send's source and delivery id never
// change, so no snapshot can disagree on them). A send has its key
// already when RecordSend recorded it (or migration 00015 found it), but
// not when an older hookbox recorded it during an upgrade, after that
// migration ran: once its row was gone, a RecordSend for the same key was
// recorded and performed again. The sends are told by starts_with, not a
// range on source, whose order is the database's collation (see 00015).
// A RecordSend of that key under way (its key claimed, its insert waiting
// for the row data deletes) takes the two locks in the other order; the
// server ends one of the two as a deadlock, and either way the send is
// recorded once: purgeOnce runs the batch again, or the handler's
// transaction is retried and finds the key claimed.
const purgeBatch = `WITH gone AS (
    DELETE FROM queue q USING event_data d
    WHERE d.id = q.id AND q.id = ANY ($2) AND d.id = ANY ($2) AND CASE WHEN %s THEN true ELSE false END
    RETURNING q.id, q.status, q.fanout),
kids AS (
    DELETE FROM queue WHERE id = ANY (ARRAY(SELECT id FROM event_data
        WHERE parent_id IS NOT NULL AND parent_id = ANY (ARRAY(SELECT id FROM gone WHERE fanout))))
    RETURNING id),
data AS (
    DELETE FROM event_data WHERE id = ANY (ARRAY(SELECT id FROM gone UNION ALL SELECT id FROM kids))
    RETURNING id, source, delivery_id),
keys AS (
    INSERT INTO effect_keys (scope, key, event_id)
    SELECT source, delivery_id, id FROM data WHERE starts_with(source, 'send:')
    ON CONFLICT DO NOTHING)
SELECT g.id, %s FROM gone g
UNION ALL SELECT id, NULL FROM kids`

// purgeLock locks, in id order, the finished deliveries (in the states
// listed, before $1) of the FanOut events among the ids $2, before
// purgeBatch runs in the same transaction. Without it a replay of a
// delivery under way (replayLock holds its row, replaySet has made it
// pending, not yet committed) was lost: purgeBatch's snapshot still saw the
// delivery done, so its event went, and kids, which waited for the row,
// judged it again only by id and deleted it, pending, with its data and
// attempts. Once purgeLock has returned, a replay that held a delivery has
// committed (its row, pending now, is left out here, and purgeBatch, a
// later statement, sees it so and keeps the event), and a replay that
// comes later waits for the purge and finds the delivery gone. The
// condition is a CASE for the reason purgeBatch's is: a plan from the
// index of finished rows would walk all of them.
//
// Deliveries have larger ids than their event, so the purge's locks are
// not all in id order (this statement's, then gone's, in order each): a
// replay holding a row of the slice and waiting for one of these
// deliveries can deadlock with it (as it could with kids before), and
// purgeOnce runs the batch again.
const purgeLock = `SELECT q.id FROM queue q
WHERE q.id = ANY (ARRAY(SELECT d.id FROM event_data d
    WHERE d.parent_id IS NOT NULL AND d.parent_id = ANY (ARRAY(SELECT f.id FROM queue f
        WHERE f.id = ANY ($2) AND f.fanout))))
  AND CASE WHEN q.status IN %s AND q.updated_at < $1 THEN true ELSE false END
ORDER BY q.id FOR UPDATE`

// purgeAttempts deletes the attempts of the rows a purgeBatch deleted. It
// is a statement of its own, after purgeBatch in its transaction, so its
// snapshot sees an attempt that a finish recorded while the batch waited
// for the event's lock (a refused outcome records a "lost" attempt); a CTE
// of purgeBatch would not, and leave that row behind. Once the batch has
// deleted an event, no finish can record an attempt for it (finishes lock
// their events first, and skip those that are gone).
const purgeAttempts = `DELETE FROM attempts WHERE event_id = ANY ($1)`

// purgedStatus is the status a purge counts the queue row q (an alias
// with id, status and fanout) under: the one an operator reads. For a
// FanOut event that is its deliveries' (stored when it has none, a
// store_only source's; dead when one is dead; else done), since a purge
// takes one only when they are all finished.
func purgedStatus(q string) string {
	return `CASE WHEN NOT ` + q + `.fanout THEN ` + q + `.status
        WHEN NOT EXISTS (SELECT 1 FROM event_data e WHERE e.parent_id = ` + q + `.id) THEN 'stored'
        WHEN EXISTS (SELECT 1 FROM event_data e JOIN queue c ON c.id = e.id
            WHERE e.parent_id = ` + q + `.id AND c.status = 'dead') THEN 'dead'
        ELSE ` + q + `.status END`
}

// purgeable is the condition of a purge of the listed states before $1,
// over a queue row q and its event_data row d. Deliveries go with their
// event (see purgeBatch), and an event goes only when all its deliveries
// may: never one still to be worked.
func purgeable(states string) string {
	return `q.status IN ` + states + ` AND q.updated_at < $1 AND d.parent_id IS NULL
      AND NOT (q.fanout AND EXISTS (SELECT 1 FROM events c WHERE c.parent_id = q.id
          AND (c.status NOT IN ` + states + ` OR c.updated_at >= $1)))`
}

// dbCutoff turns before, a retention window's start on the caller's
// clock, into the same distance before the database's clock now (one
// round trip). Finished rows are stamped on the database's clock
// (finishedAt, and a claim's, replay's or retire's now()), by every
// process, whatever its own clock reads; judged against before itself, a
// purge or payload retention run by a host whose clock is ahead by more
// than the window deleted every host's rows as they finished. The time
// returned is one value a whole run compares with, so its statements
// keep their plans (the walk along queue_finished among them).
func (s *Store) dbCutoff(ctx context.Context, before time.Time) (time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT `+dbNow("$1::bigint"), fromNow(before)).Scan(&at)
	return at, err
}

// Purge deletes finished events in batches; see hookbox.Ops. Each batch is
// its own transaction (purgeOnce), so no purge holds locks for long. The
// window is judged on the database's clock (dbCutoff): p.Before, on the
// caller's clock, is taken as how long before the caller's now the window
// starts.
func (s *Store) Purge(ctx context.Context, p hookbox.PurgeParams) (hookbox.PurgeResult, error) {
	var res hookbox.PurgeResult
	if err := hookbox.CheckCutoff(p.Before, time.Now()); err != nil {
		return res, fmt.Errorf("postgres: purge: %w", err)
	}
	var err error
	if p.Before, err = s.dbCutoff(ctx, p.Before); err != nil {
		return res, opError(ctx, "purge", err)
	}
	states := `('done')`
	if p.IncludeDead {
		states = `('done', 'dead')`
	}
	if p.DryRun {
		rows, err := s.pool.Query(ctx, `SELECT `+purgedStatus("q")+`, count(*) FROM queue q JOIN event_data d ON d.id = q.id
            WHERE `+purgeable(states)+` GROUP BY 1`, p.Before)
		if err != nil {
			return res, opError(ctx, "purge", err)
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return hookbox.PurgeResult{}, opError(ctx, "purge", err)
			}
			res.Add(hookbox.Status(st), n)
		}
		if err := rows.Err(); err != nil {
			return hookbox.PurgeResult{}, opError(ctx, "purge", err)
		}
		return res, nil
	}
	batch := p.BatchSize
	if batch <= 0 {
		batch = 1000
	}
	q := purgeQueries{lock: fmt.Sprintf(purgeLock, states), batch: fmt.Sprintf(purgeBatch, purgeable(states), purgedStatus("g"))}
	// The candidates are read a slice at a time (purgeWalk), outside the
	// batches' transactions, along the index of finished rows from the
	// oldest to the cutoff: the rows a purge keeps (dead events, and
	// fan-out events with a delivery still to work) are passed over by
	// that read, and a run costs the finished rows before the cutoff, not
	// the ids handed out since the oldest row kept. A batch then judges
	// its slice again, by id, so its work is bounded by the slice. Before,
	// the batches walked every id from min(id) to max(id), 1000 at a time,
	// each in a transaction: one dead event kept from a year ago made each
	// hourly purge walk a year of ids (3 s for 3M ids).
	walk, group := fmt.Sprintf(purgeWalk, purgeable(states)), fmt.Sprintf(purgeWalkTime, purgeable(states))
	var after time.Time
	for {
		ids, last, full, err := s.purgeCandidates(ctx, walk, group, p.Before, after, batch)
		if err != nil {
			// The batches before this one have committed.
			return res, opError(ctx, "purge", err)
		}
		after = last
		for len(ids) > 0 {
			slice := ids[:min(batch, len(ids))]
			ids = ids[len(slice):]
			start := time.Now()
			n, err := s.purgeOnce(ctx, q, p.Before, slice, &res)
			if err != nil {
				return res, opError(ctx, "purge", err)
			}
			if n == 0 {
				continue
			}
			if p.Progress != nil {
				p.Progress(res)
			}
			if !full && len(ids) == 0 {
				break // the last slice: no pause after it
			}
			if err := hookbox.Yield(ctx, time.Since(start)); err != nil {
				return res, opError(ctx, "purge", err)
			}
		}
		if !full {
			return res, nil
		}
	}
}

// purgeWalk reads the next candidates of a purge: up to $3 events a purge
// of its states may delete (purgeable), last changed before $1 and after
// $2, in queue_finished's order. It is a statement of its own, outside the
// batches' transactions, and each read starts past the time of the last
// (never on the index entries of rows the batches deleted, which stay
// until vacuum). The judgement is a CASE over an EXISTS on purpose: it
// stays a lookup by primary key for each row the index yields, never a
// join the planner could drive from event_data.
const purgeWalk = `SELECT q.id, q.updated_at FROM queue q
WHERE q.status IN ('done', 'dead') AND q.updated_at < $1 AND q.updated_at > $2
  AND CASE WHEN EXISTS (SELECT 1 FROM event_data d WHERE d.id = q.id AND %s) THEN true ELSE false END
ORDER BY q.updated_at LIMIT $3`

// purgeWalkTime reads every candidate last changed at $2 (before $1), as
// purgeWalk judges them: the rest of the time a full read of purgeWalk
// ended in. The index keeps no order among the rows of one time, so no
// cursor can stop inside it (one by id would sort all its rows at each
// read: a bulk load or a bulk update gives a million rows one time).
const purgeWalkTime = `SELECT q.id FROM queue q
WHERE q.status IN ('done', 'dead') AND q.updated_at < $1 AND q.updated_at = $2
  AND CASE WHEN EXISTS (SELECT 1 FROM event_data d WHERE d.id = q.id AND %s) THEN true ELSE false END`

// purgeCandidates reads the next candidates of a purge after the time
// after, with walk (a purgeWalk) and, when that read is full, the rest of
// its last time with group (a purgeWalkTime). It returns their ids, the
// time the next read starts after, and whether there may be more.
func (s *Store) purgeCandidates(ctx context.Context, walk, group string, before, after time.Time, limit int) (ids []int64, last time.Time, full bool, err error) {
	rows, err := s.pool.Query(ctx, walk, before, after, limit)
	if err != nil {
		return nil, after, false, err
	}
	type candidate struct {
		id int64
		at time.Time
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		err := row.Scan(&c.id, &c.at)
		return c, err
	})
	if err != nil || len(cs) == 0 {
		return nil, after, false, err
	}
	last = cs[len(cs)-1].at
	for _, c := range cs {
		if c.at.Before(last) || len(cs) < limit {
			ids = append(ids, c.id)
		}
	}
	if len(cs) < limit {
		return ids, last, false, nil
	}
	rows, err = s.pool.Query(ctx, group, before, last)
	if err != nil {
		return nil, after, false, err
	}
	rest, err := rowscan.IDs(rows)
	rows.Close()
	if err != nil {
		return nil, after, false, err
	}
	return append(ids, rest...), last, true, nil
}

// purgeQueries are the statements of a purge's batches, for its states.
type purgeQueries struct {
	lock  string // a purgeLock
	batch string // a purgeBatch
}

// purgeOnce deletes, in one transaction, the purgeable events among ids,
// their deliveries and the attempts of both (purgeLock, then
// purgeBatch and purgeAttempts), counts the events into res and returns
// how many. A transaction the server rolled back because of another
// (a deadlock with a replay, see purgeLock) is run again (runAgain): it
// changed nothing, and the batch is judged afresh.
func (s *Store) purgeOnce(ctx context.Context, q purgeQueries, before time.Time, ids []int64, res *hookbox.PurgeResult) (int, error) {
	return runAgain(ctx, retryable, func() (int, error) {
		return s.purgeTx(ctx, q, before, ids, res)
	})
}

// runAgain runs tx, one transaction, until it succeeds, fails with an
// error again does not accept (one the server rolled back, so that tx
// changed nothing), ctx ends, or it has run maxTxRuns times. Before each
// run after the first it waits retryPause times the runs so far, so that
// the transaction it lost to can go on to its commit: run again at once,
// tx could take the same locks first and lose again.
func runAgain[T any](ctx context.Context, again func(error) bool, tx func() (T, error)) (T, error) {
	for run := 1; ; run++ {
		v, err := tx()
		if err == nil || run == maxTxRuns || !again(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Duration(run) * retryPause):
		}
	}
}

// maxTxRuns bounds how often runAgain runs one transaction.
const maxTxRuns = 3

// retryPause is how long runAgain waits before the second run of a
// transaction (twice as long before the third).
const retryPause = 100 * time.Millisecond

// purgeTx is one attempt of purgeOnce.
func (s *Store) purgeTx(ctx context.Context, q purgeQueries, before time.Time, ids []int64, res *hookbox.PurgeResult) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, q.lock, before, ids); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, q.batch, before, ids)
	if err != nil {
		return 0, err
	}
	var deleted []int64
	var counted hookbox.PurgeResult
	n := 0
	for rows.Next() {
		var id int64
		var st *string
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return 0, err
		}
		deleted = append(deleted, id)
		if st != nil { // an event, not one of its deliveries
			counted.Add(hookbox.Status(*st), 1)
			n++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(deleted) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, purgeAttempts, deleted); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	res.Merge(counted)
	return n, nil
}

// clearBatch drops the sender data of up to 1000 done events last changed
// before $1 and after the cursor ($2, $3) in (updated_at, id) order,
// skipping rows another transaction holds, and returns them for the next
// cursor. It holds the events' queue rows while it clears: a replay locks
// them before it checks that a payload is there (see replaySet).
//
// What goes is what the sender sent or what was taken from it: the
// payload and headers (event_data), the order key (a field of the
// payload; no done row takes part in ordering) and last error (queue),
// and the error texts of the events' attempts (a reply or an output may
// echo the payload). The ids, event type, status, times and each
// attempt's number, owner and outcome stay: the dedupe memory and the
// history. A row is picked while it still holds any of it (payload,
// headers other than {} or null, order key, last error), so one cleared
// before clearing took more than the payload is cleared by the next run,
// and a cleared one is passed over. Each table is written only where it
// holds something to drop: a queue row rewritten for nothing gets new
// entries in the queue's indexes.
//
// Every table is read by index for the slice's rows, never whole: the
// rows written are found by = ANY of an array, a plan by index whatever
// the CTE's estimate (see purgeBatch); written IN (SELECT id FROM picked),
// the payloads' update was a hash join over a scan of all of event_data.
// A FanOut event is cleared once every delivery of it has finished
// before $1 (the event row's time is when it was stored; a delivery that
// finished late starts the window again, as in purgeBatch). Whether it
// has a delivery left to work, or finished since, is a scalar subquery
// (a lookup by events_children for each FanOut row the walk meets), not
// an EXISTS, which the planner ran as a hashed subplan built from all of
// event_data, with a queue lookup for each of its rows, at every batch
// (TestClearBatchReadsBySlice).
const clearBatch = `WITH picked AS (
    SELECT q.id, q.updated_at FROM queue q JOIN event_data d ON d.id = q.id
    WHERE q.status = 'done' AND q.updated_at < $1 AND (q.updated_at, q.id) > ($2, $3)
      AND (d.payload IS NOT NULL OR d.headers NOT IN ('{}', 'null')
           OR q.order_key IS NOT NULL OR q.last_error IS NOT NULL)
      AND (NOT q.fanout OR (SELECT c.id FROM event_data c JOIN queue cq ON cq.id = c.id
          WHERE c.parent_id IS NOT NULL AND c.parent_id = q.id AND (cq.status NOT IN ('done', 'dead') OR cq.updated_at >= $1) LIMIT 1) IS NULL)
    ORDER BY q.updated_at, q.id LIMIT 1000 FOR NO KEY UPDATE OF q SKIP LOCKED
), data AS (
    UPDATE event_data SET payload = NULL, headers = '{}'
    WHERE id = ANY (ARRAY(SELECT id FROM picked)) AND (payload IS NOT NULL OR headers NOT IN ('{}', 'null'))
), derived AS (
    UPDATE queue SET order_key = NULL, last_error = NULL
    WHERE id = ANY (ARRAY(SELECT id FROM picked)) AND (order_key IS NOT NULL OR last_error IS NOT NULL)
), errors AS (
    UPDATE attempts SET error = NULL
    WHERE event_id = ANY (ARRAY(SELECT id FROM picked)) AND error IS NOT NULL
)
SELECT id, updated_at FROM picked`

// ClearPayloads drops the sender data of old done events (clearBatch);
// see hookbox.Ops. Each batch of 1000 is one statement, its own transaction; a cursor carries
// the run past what it cleared, so no batch rescans it. As in Purge, the
// window is judged on the database's clock (dbCutoff).
func (s *Store) ClearPayloads(ctx context.Context, before time.Time) (int, error) {
	if err := hookbox.CheckCutoff(before, time.Now()); err != nil {
		return 0, fmt.Errorf("postgres: clear payloads: %w", err)
	}
	before, err := s.dbCutoff(ctx, before)
	if err != nil {
		return 0, opError(ctx, "clear payloads", err)
	}
	total := 0
	afterAt, afterID := time.Time{}, int64(0)
	for {
		rows, err := s.pool.Query(ctx, clearBatch, before, afterAt, afterID)
		if err != nil {
			return total, opError(ctx, "clear payloads", err)
		}
		n := 0
		for rows.Next() {
			var id int64
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				rows.Close()
				return total, opError(ctx, "clear payloads", err)
			}
			if at.After(afterAt) || (at.Equal(afterAt) && id > afterID) {
				afterAt, afterID = at, id
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return total, opError(ctx, "clear payloads", err)
		}
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}

// Stats counts events by status; see hookbox.Ops. The unfinished and
// dead events, and the oldest due one, are read at each call from the
// partial indexes that hold them (statsFresh): what that reads grows
// with them, never with the done ones. The done events can only be
// counted by reading every finished row of the queue (a second at three
// million, at every scrape of every instance), so that count is kept
// (doneCount): read again as package slowcount says, at each call below
// slowcount.ExactBelow, at most every slowcount.Recount above.
func (s *Store) Stats(ctx context.Context, now time.Time) (hookbox.Stats, error) {
	st := hookbox.NewStats()
	var pending, processing, dead int
	var oldest *time.Time
	var at time.Time
	if err := s.pool.QueryRow(ctx, statsFresh, fromNow(now)).Scan(&pending, &processing, &dead, &oldest, &at); err != nil {
		return st, opError(ctx, "stats", err)
	}
	done, err := s.doneCount(ctx)
	if err != nil {
		return st, opError(ctx, "stats", err)
	}
	st.ByStatus[hookbox.StatusPending] = pending
	st.ByStatus[hookbox.StatusProcessing] = processing
	st.ByStatus[hookbox.StatusDead] = dead
	st.ByStatus[hookbox.StatusDone] = done
	st.OldestDue, st.OldestDueAge = dueSince(oldest, at)
	return st, nil
}

// statsFresh reads Stats' figures of each call: the unfinished events by
// status, through queue_due; the dead ones, through queue_dead; and the
// oldest due time (statsDue). FanOut records, which are no events of
// their own, are left out.
var statsFresh = `SELECT
    (SELECT count(*) FROM queue WHERE status = 'pending' AND NOT fanout),
    (SELECT count(*) FROM queue WHERE status = 'processing' AND NOT fanout),
    (SELECT count(*) FROM queue WHERE status = 'dead' AND NOT fanout),
    d.oldest, d.at
FROM (` + statsDue + `) d`

// statsDone counts the done events (FanOut records left out): a read of
// the whole queue table.
const statsDone = `SELECT count(*) FROM queue WHERE status = 'done' AND NOT fanout`

// doneCount returns the count of done events: the last one while it is
// fresh enough (slowcount), else a new one (statsDone).
func (s *Store) doneCount(ctx context.Context) (int, error) {
	return s.done.Get(func() (int, error) {
		var n int
		err := s.pool.QueryRow(ctx, statsDone).Scan(&n)
		return n, err
	})
}

// statsDue finds the oldest due event, due by the time $1 (the caller's
// now, as fromNow) on the database's clock, the one claims judge by and
// next_attempt_at is written on, and returns that time with it. Judged by
// the caller's clock, as it was, an event read as due (and waiting) as
// long as its host's clock was ahead of the server's, and a host behind
// it did not see due events that claims were taking.
var statsDue = `SELECT min(next_attempt_at) AS oldest, ` + dbNow("$1::bigint") + ` AS at FROM queue
        WHERE status IN ('pending', 'processing') AND next_attempt_at <= ` + dbNow("$1::bigint")

// dueSince returns the oldest due time a statement found (nil: none) and
// how long it has been due at at, the statement's now on the same clock
// (the database's): the age hookbox_oldest_due_seconds, the console and
// serve's warning about unworked targets show, never the difference with
// the caller's own clock.
func dueSince(oldest *time.Time, at time.Time) (time.Time, time.Duration) {
	if oldest == nil {
		return time.Time{}, 0
	}
	return oldest.UTC(), hookbox.DueAge(*oldest, at)
}

// opError reports a failed operator statement: a value the server refuses
// (SQLSTATE class 22, such as a filter that is not valid UTF-8) is an error
// of the request; any other failure matches hookbox.ErrUnavailable.
func opError(ctx context.Context, op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, classDataException) {
		return fmt.Errorf("postgres: %s: invalid value: %v", op, err)
	}
	return unavailable(ctx, op, err)
}

// InTx runs fn in a transaction on the store's database; see
// hookbox.Transactor. The transaction commits when fn returns nil and rolls
// back when it returns an error (returned unchanged) or panics. Failing to
// begin or to commit matches hookbox.ErrUnavailable.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *hookbox.Tx) error) (err error) {
	var tx *sql.Tx
	err = s.pool.whileRefused(ctx, func() (err error) {
		tx, err = s.db.BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return unavailable(ctx, "begin", err)
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(ctx, hookbox.NewTx(tx, hookbox.DialectPostgres, nil)); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return unavailable(ctx, "commit", err)
	}
	return nil
}
