package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

var _ hookbox.Ops = (*Store)(nil)

// replayable lists the states a replay may move from.
func replayable(includeDone bool) string {
	if includeDone {
		return `('dead', 'pending', 'done')`
	}
	return `('dead', 'pending')`
}

// replayBatch is how many events one replay transaction changes.
const replayBatch = 1000

// Replay sends events back to pending; see hookbox.Ops. It finds the
// events on a reader, replayBatch at a time in id order, without the
// write lock; each slice is then judged again and replayed in a short
// write transaction that reads only the slice's rows, by id
// (replayJudgeSQL). So a replay never holds up ingest for longer than one
// slice takes, however many events it passes over to find its own.
func (s *Store) Replay(ctx context.Context, p hookbox.ReplayParams) (hookbox.ReplayResult, error) {
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	where, args := replayWhere(p)
	// The reads made once a replay find their events among the
	// candidates of the partial indexes when there are such (see
	// replayCandidates); the slices' picks walk up the ids instead.
	onceWhere, onceArgs := where, args
	if cond, cargs := replayCandidates(p); cond != "" {
		onceWhere, onceArgs = where+` AND `+cond, slices.Concat(args, cargs)
	}
	var res hookbox.ReplayResult
	if p.DryRun {
		// A read: one snapshot on a reader connection, without the write
		// lock, so a dry run over many events never holds up ingest.
		var err error
		res.Replayed, res.NoPayload, err = queryIDsSplit(ctx, s.reader,
			`SELECT id, length(payload) IS NULL FROM events`+onceWhere+` ORDER BY id`, onceArgs...)
		if err != nil {
			return res, fmt.Errorf("sqlite: replay: %w", err)
		}
	}
	// Each read starts after the last id the one before it returned, so
	// the rows the filter passes over are read once a replay. replayBatch
	// events per write transaction: the writer keeps statement journals in
	// memory (temp_store), so one statement over a million events would
	// hold a copy of every page it changes.
	n := len(args)
	pick := `SELECT id FROM events` + where + ` AND length(payload) IS NOT NULL AND id > ? ORDER BY id LIMIT ?`
	// seen counts the events picked by the slices before, and by the
	// replay this one goes on from, for the pace (ReplayWait).
	seen := min(max(p.PaceAfter, 0), hookbox.MaxPaceAfter)
	res.PacedCount = seen
	for after := max(p.AfterID, 0); !p.DryRun; {
		picked, err := queryIDs(ctx, s.reader, pick, append(args[:n:n], after, replayBatch)...)
		if err != nil {
			res.ResumeAfter = &after
			return res, fmt.Errorf("sqlite: replay: %w", err)
		}
		if len(picked) > 0 {
			due := make(map[int64]int64, len(picked))
			for i, id := range picked {
				due[id] = millis(now.Add(p.ReplayWait(seen + i)))
			}
			seen += len(picked)
			replayed, err := s.replaySlice(ctx, where, args, picked, now, due)
			if err != nil {
				// The slices before this one have committed: say
				// where they end, for a replay that goes on from there.
				res.ResumeAfter = &after
				slices.Sort(res.Replayed)
				return res, fmt.Errorf("sqlite: replay: %w", err)
			}
			res.Replayed = append(res.Replayed, replayed...)
			res.PacedCount = seen
		}
		if p.Progress != nil {
			p.Progress(len(res.Replayed))
		}
		if len(picked) < replayBatch {
			break
		}
		after = picked[len(picked)-1]
	}
	if !p.DryRun {
		// Events without a payload are never replayed, so they are still
		// in the state that matched: find them after the updates.
		var err error
		res.NoPayload, err = queryIDs(ctx, s.reader, `SELECT id FROM events`+onceWhere+` AND length(payload) IS NULL ORDER BY id`, onceArgs...)
		if err != nil {
			return res, fmt.Errorf("sqlite: replay: %w", err)
		}
	}
	slices.Sort(res.Replayed)
	var parents, deliveries []int64
	if len(p.IDs) > 0 && len(res.Replayed) > 0 {
		var err error
		parents, err = queryIDs(ctx, s.reader, `SELECT DISTINCT parent_id FROM events
            WHERE parent_id IS NOT NULL AND id IN `+idList, jsonNumbers(res.Replayed))
		if err != nil {
			return res, fmt.Errorf("sqlite: replay: %w", err)
		}
	}
	if len(p.IDs) > 0 {
		// Every delivery of a named FanOut event: those the replay left
		// alone (in flight, done, changed) are reported by their own id.
		var err error
		deliveries, err = queryIDs(ctx, s.reader, `SELECT id FROM events
            WHERE parent_id IN `+idList+` ORDER BY id`, jsonNumbers(p.IDs))
		if err != nil {
			return res, fmt.Errorf("sqlite: replay: %w", err)
		}
	}
	res.Skipped = hookbox.ReplaySkipped(p.IDs, res.Replayed, res.NoPayload, parents, deliveries)
	return res, nil
}

// replayWhere is the WHERE clause (with a leading space) and its args
// that select the events p replays, whatever their payload, above
// p.AfterID. A FanOut event
// is never replayed itself (NOT fanout), so the status an operator reads
// (statusSummary) is the status column here: the filter compares the
// column, which lets a replay of dead events read events_dead instead of
// every row.
func replayWhere(p hookbox.ReplayParams) (string, []any) {
	var conds []string
	var args []any
	if len(p.IDs) > 0 {
		// A FanOut event named is replayed as its deliveries.
		// The ids as one JSON array each, not a placeholder each: SQLite
		// binds at most 32,766 arguments to a statement, and a replay of
		// 16,384 named events failed with "too many SQL variables".
		conds = append(conds, `(id IN `+idList+` OR parent_id IN `+idList+`)`)
		named := jsonNumbers(p.IDs)
		args = append(args, named, named)
		if cond, cargs := expectSQL(p); cond != "" {
			conds, args = append(conds, cond), append(args, cargs...)
		}
	} else {
		f := p.Filter
		status := f.Status
		f.Status = ""
		where, fargs := filterSQL(f)
		if where != "" {
			conds, args = append(conds, strings.TrimPrefix(where, " WHERE ")), fargs
		}
		if status != "" {
			conds, args = append(conds, `status = ?`), append(args, string(status))
		}
	}
	if p.AfterID > 0 {
		conds, args = append(conds, `id > ?`), append(args, p.AfterID)
	}
	conds = append(conds, `NOT fanout AND status IN `+replayable(p.IncludeDone))
	return ` WHERE ` + strings.Join(conds, ` AND `), args
}

// replayCandidates is a condition (and its args) that holds for the
// events p may replay when they are dead or pending (not p.IncludeDone,
// or p's Status dead or pending), and not named by id: the rows of those
// statuses, of p's source if it has one, read through events_dead and
// events_due. Without it, a replay of one source's dead events read
// every event of the source through the (source, delivery_id) index and
// sorted them, and one of the pending events every row (seconds at three
// million). Empty when p may replay done events. Only for the reads
// made once a replay (a dry run, the events without payload): each
// slice's pick would read all the candidates again.
func replayCandidates(p hookbox.ReplayParams) (string, []any) {
	if len(p.IDs) > 0 {
		return "", nil
	}
	var statuses []hookbox.Status
	switch p.Filter.Status {
	case "":
		if p.IncludeDone {
			return "", nil
		}
		statuses = []hookbox.Status{hookbox.StatusDead, hookbox.StatusPending}
	case hookbox.StatusDead, hookbox.StatusPending:
		statuses = []hookbox.Status{p.Filter.Status}
	default:
		return "", nil
	}
	var parts []string
	var args []any
	for _, st := range statuses {
		q := `SELECT id FROM ` + statusRows[st]
		if p.Filter.Source != "" {
			q += ` AND (source = ? OR (source > ? AND source < ?))`
			args = append(args, p.Filter.Source, p.Filter.Source+"/", p.Filter.Source+"0")
		}
		parts = append(parts, q)
	}
	return `id IN (` + strings.Join(parts, ` UNION ALL `) + `)`, args
}

// expectSQL is the condition (and its args) that p.Expect puts on the
// rows of a replay of named events: a named event only while its attempts
// are the number expected, a delivery of a named FanOut event only while
// the sum of its event's deliveries' attempts is (hookbox.ReplayAttempts).
// Empty when p expects nothing of a named id. It is part of replayWhere,
// so replaySlice checks it again under the write lock, in the transaction
// that replays.
func expectSQL(p hookbox.ReplayParams) (string, []any) {
	ids, attempts := p.Expected()
	if len(ids) == 0 {
		return "", nil
	}
	rows := make([]string, len(ids))
	var args []any
	for i, id := range ids {
		rows[i], args = `(?, ?)`, append(args, id, attempts[i])
	}
	return `NOT EXISTS (SELECT 1 FROM (VALUES ` + strings.Join(rows, `, `) + `) x
        WHERE (x.column1 = events.id AND events.attempts <> x.column2)
           OR (x.column1 = events.parent_id AND (SELECT coalesce(sum(c.attempts), 0) FROM events c
                WHERE c.parent_id = x.column1) <> x.column2))`, args
}

// replaySlice replays, in one write transaction, the events among picked
// (ids a read on a reader found) that still match where (replayWhere's,
// over args) and still hold their payload, each due at its time in due
// (milliseconds, by id), and returns their ids. An event claimed,
// finished, replayed or cleared since the read is judged on what it is
// now.
func (s *Store) replaySlice(ctx context.Context, where string, args []any, picked []int64, now time.Time, due map[int64]int64) ([]int64, error) {
	var replayed []int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ids, err := queryIDs(ctx, tx, replayJudgeSQL(where, len(picked)), slices.Concat(args, int64sAny(picked))...)
		if err != nil || len(ids) == 0 {
			return err
		}
		in, idArgs := ` WHERE id IN (`+placeholders(len(ids))+`)`, int64sAny(ids)
		// A first attempt that succeeded is read from the event's row
		// (hookbox.AttemptStored), which the replay rewrites: write it
		// down first. Then mark the replay in each event's history.
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (event_id, attempt, owner, outcome, started_at, finished_at)
                SELECT id, 1, '', '`+hookbox.AttemptDone+`', updated_at, updated_at FROM events`+in+` AND `+impliedFirstAttempt,
			idArgs...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (event_id, attempt, owner, outcome, started_at, finished_at)
                SELECT id, attempts, '`+hookbox.OperatorOwner+`', '`+hookbox.AttemptReplay+`', ?, ? FROM events`+in,
			append([]any{millis(now), millis(now)}, idArgs...)...); err != nil {
			return err
		}
		// Each event's due time comes with its id, a pair of a JSON
		// array: the update reads the rows by id, one lookup each.
		pairs := make([][2]int64, len(ids))
		for i, id := range ids {
			pairs[i] = [2]int64{id, due[id]}
		}
		if _, err := tx.ExecContext(ctx, replayUpdate, millis(now), jsonNumbers(pairs)); err != nil {
			return err
		}
		replayed = ids
		return nil
	})
	return replayed, err
}

// replayUpdate puts events back to pending, updated at ?1, each due at
// its own time: ?2 is a JSON array of [id, due] pairs (jsonNumbers), read
// once, each row then found by id.
const replayUpdate = `UPDATE events SET status = 'pending', attempt_base = attempts, next_attempt_at = d.due,
        lease_owner = NULL, last_error = NULL, updated_at = ?1
    FROM (SELECT value ->> 0 AS id, value ->> 1 AS due FROM json_each(?2)) AS d
    WHERE events.id = d.id`

// replayJudgeSQL selects which of n ids (the last n arguments, after
// where's) still match where and hold their payload. NOT INDEXED: the
// rows are read by id only, never along an index the filter's terms
// could pick (the source's range of events_due, say), so the work under
// the write lock is bounded by the slice.
func replayJudgeSQL(where string, n int) string {
	return `SELECT id FROM events NOT INDEXED` + where + ` AND length(payload) IS NOT NULL AND id IN (` + placeholders(n) + `)`
}

// Purge deletes finished events in batches; see hookbox.Ops.
func (s *Store) Purge(ctx context.Context, p hookbox.PurgeParams) (hookbox.PurgeResult, error) {
	var res hookbox.PurgeResult
	if err := hookbox.CheckCutoff(p.Before, time.Now()); err != nil {
		return res, fmt.Errorf("sqlite: purge: %w", err)
	}
	states := `('done')`
	if p.IncludeDead {
		states = `('done', 'dead')`
	}
	cond, before := purgeable(states)+` AND `+keepsNewest, millis(p.Before)
	if p.DryRun {
		rows, err := s.reader.QueryContext(ctx, `SELECT `+purgedStatus+`, count(*) FROM events
            WHERE `+finished+` AND (`+cond+`) GROUP BY 1`, before)
		if err != nil {
			return res, fmt.Errorf("sqlite: purge: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return res, fmt.Errorf("sqlite: purge: %w", err)
			}
			res.Add(hookbox.Status(st), n)
		}
		return res, rows.Err()
	}
	// 250 rows a batch hold the write lock about 4 ms (about 16 µs a
	// row with its index entries), so ingest waits behind no more than
	// one short batch.
	batch := p.BatchSize
	if batch <= 0 {
		batch = 250
	}
	// The candidates are found on a reader (walkFinished), so the rows a
	// purge keeps (dead events, and the deliveries of a fan-out event
	// still being worked, which pile up at the old end) are passed over
	// once a run and without the write lock; a batch under the lock reads
	// only its candidates, by id.
	for ids, err := range s.walkFinished(ctx, cond, before, batch) {
		if err != nil {
			return res, fmt.Errorf("sqlite: purge: %w", err)
		}
		start := time.Now()
		// The batch's deletions count once it has committed: a batch
		// that rolls back (its commit refused) deleted nothing.
		var batchRes hookbox.PurgeResult
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			batchRes = hookbox.PurgeResult{}
			judged, err := judgeFinished(ctx, tx, cond, before, ids)
			if err != nil || len(judged) == 0 {
				return err
			}
			in := ` IN (` + placeholders(len(judged)) + `)`
			if _, err := tx.ExecContext(ctx, purgeSendKeys(in), int64sAny(judged)...); err != nil {
				return err
			}
			// A FanOut event's status is read from its deliveries, so
			// before the deletes.
			fanned, err := fanOutStatus(ctx, tx, in, judged)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE parent_id`+in, int64sAny(judged)...); err != nil {
				return err
			}
			rows, err := tx.QueryContext(ctx, `DELETE FROM events WHERE id`+in+` RETURNING id, status`, int64sAny(judged)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id int64
				var st string
				if err := rows.Scan(&id, &st); err != nil {
					return err
				}
				if f, ok := fanned[id]; ok {
					st = f
				}
				batchRes.Add(hookbox.Status(st), 1)
			}
			return rows.Err()
		})
		if err != nil {
			return res, fmt.Errorf("sqlite: purge: %w", err)
		}
		res.Merge(batchRes)
		if p.Progress != nil {
			p.Progress(res)
		}
		if len(ids) < batch {
			break // the last slice: no pause after it
		}
		if err := hookbox.Yield(ctx, time.Since(start)); err != nil {
			return res, fmt.Errorf("sqlite: purge: %w", err)
		}
	}
	if res.Total() > 0 {
		// Leave no copy of the deleted rows in the WAL, and keep it from
		// growing: a purge rewrites many pages at once. With truncateWAL's
		// short wait for readers, not the writer's busy timeout: the
		// checkpoint holds the writer, and a reader on an older snapshot
		// (the console, an export) kept ingest waiting behind it for the
		// whole timeout. If readers stay, the background loop empties it
		// once they have gone (emptyWAL).
		s.emptyWAL()
	}
	return res, nil
}

// purgeSendKeys claims in effect_keys the key of every send among the
// events a purge batch deletes (in, an IN list of their ids), in the
// batch's transaction. A send has its key already when RecordSend
// recorded it (or migration 00014 found it), but not when an older
// hookbox recorded it during an upgrade, after that migration ran: once
// its row was gone, a RecordSend for the same key was recorded and
// performed again.
func purgeSendKeys(in string) string {
	return `INSERT INTO effect_keys (scope, key, event_id)
        SELECT source, delivery_id, id FROM events WHERE substr(source, 1, 5) = 'send:' AND id` + in + `
        ON CONFLICT DO NOTHING`
}

// purgedStatus is the status a purge counts a finished row of events
// under: the one an operator reads. For a FanOut event that is its
// deliveries' (stored when it has none, a store_only source's; dead when
// one is dead; else done), since a purge takes one only when they are all
// finished.
const purgedStatus = statusSummary

// fanOutStatus returns the purgedStatus of each FanOut event among ids
// (in, their IN list), read while its deliveries are still there.
func fanOutStatus(ctx context.Context, tx *sql.Tx, in string, ids []int64) (map[int64]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, `+purgedStatus+` FROM events WHERE fanout AND id`+in, int64sAny(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			return nil, err
		}
		st[id] = s
	}
	return st, rows.Err()
}

// purgeable selects, among the finished rows, those a purge of the
// states (an SQL list) deletes: deliveries go with their event, and an
// event goes only when all its deliveries may, never one still to be
// worked.
func purgeable(states string) string {
	return `status IN ` + states + ` AND parent_id IS NULL
        AND NOT (fanout AND EXISTS (SELECT 1 FROM events c WHERE c.parent_id = events.id
            AND (c.status NOT IN ` + states + ` OR c.updated_at >= ?1)))`
}

// keepsNewest leaves out of a purge the event that holds the largest id
// of events, or whose delivery holds it (deliveries go with their
// event). events.id is an INTEGER PRIMARY KEY without AUTOINCREMENT, so
// SQLite gives a new row the largest id in the table plus one: once a
// purge deleted the newest rows, their ids went to the next events, and
// an id (Hookbox-Event-Id, log lines, tail's cursor, replay ID) named two
// events. Keeping that one row costs a purge one lookup by the primary
// key, and ingest and upgrades nothing (AUTOINCREMENT would mean
// rebuilding the table, every row of it, and writing sqlite_sequence at
// every insert). The row is the newest, so a purge keeps it only when
// nothing newer came since the cutoff, and deletes it once one has.
const keepsNewest = `id <> (SELECT coalesce(parent_id, id) FROM events WHERE id = (SELECT max(id) FROM events))`

// clearable selects, among the finished rows, those whose sender data
// ClearPayloads drops: done rows that still hold some (holdsSenderData).
// A fan-out event keeps its data until every delivery of it has finished
// before the cutoff (?1), as purgeable judges it: the event row's own
// time is when it was stored, and a delivery that finished late (a
// target paused, retried for days, a replay) starts the window again.
const clearable = `status = 'done' AND ` + holdsSenderData + `
    AND NOT (fanout AND EXISTS (SELECT 1 FROM events c WHERE c.parent_id = events.id
        AND (c.status NOT IN ('done', 'dead') OR c.updated_at >= ?1)))`

// holdsSenderData is true of a row that holds data clearEventData drops:
// its payload, a header (headers longer than '{}' or 'null', which is
// what a delivery without headers stores; headers is a BLOB, which never
// equals a text literal, so the test is on its length), an order key or a
// last error. A row cleared before clearing took more than the payload
// holds the rest still: the next run clears it, and a cleared row is
// passed over. Every term reads the row walkFinished reads anyway, and
// none is a function in an index's predicate (see 00015_dead_keys.sql).
const holdsSenderData = `(length(payload) IS NOT NULL OR length(headers) > 4 OR order_key IS NOT NULL OR last_error IS NOT NULL)`

// clearEventData and clearAttemptErrors, each followed by an IN list of
// ids, drop from those events what the sender sent or what was taken from
// it: the payload, the headers, the order key (a field of the payload; no
// done row takes part in ordering), the last error and the error texts of
// their attempts (a reply or an output may echo the payload). They keep
// the dedupe memory and the history: the ids, event type, status, times,
// and each attempt's number, owner and outcome.
const (
	clearEventData     = `UPDATE events SET payload = NULL, headers = '{}', order_key = NULL, last_error = NULL WHERE id`
	clearAttemptErrors = `UPDATE attempts SET error = NULL WHERE error IS NOT NULL AND event_id`
)

// ClearPayloads drops the sender data of old done events; see
// hookbox.Ops. It walks the finished events once (walkFinished), 1000
// candidates at a time, and clears each slice in a short write
// transaction: a run costs one pass over the finished rows, never a
// rescan of those it already cleared.
func (s *Store) ClearPayloads(ctx context.Context, before time.Time) (int, error) {
	if err := hookbox.CheckCutoff(before, time.Now()); err != nil {
		return 0, fmt.Errorf("sqlite: clear payloads: %w", err)
	}
	total := 0
	for ids, err := range s.walkFinished(ctx, clearable, millis(before), 1000) {
		if err != nil {
			return total, fmt.Errorf("sqlite: clear payloads: %w", err)
		}
		var n int64
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			judged, err := judgeFinished(ctx, tx, clearable, millis(before), ids)
			if err != nil || len(judged) == 0 {
				return err
			}
			in := ` IN (` + placeholders(len(judged)) + `)`
			r, err := tx.ExecContext(ctx, clearEventData+in, int64sAny(judged)...)
			if err != nil {
				return err
			}
			if n, err = r.RowsAffected(); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, clearAttemptErrors+in, int64sAny(judged)...)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("sqlite: clear payloads: %w", err)
		}
		total += int(n)
	}
	if total > 0 {
		s.emptyWAL() // no copy of the cleared data left in the WAL
	}
	return total, nil
}

// finished selects the rows events_finished holds that were last changed
// before ?1: what every retention statement starts from.
const finished = `status IN ('done', 'dead') AND updated_at < ?1`

// walkFinished walks the finished events last changed before before that
// match cond (SQL over events, which may use ?1 for before), once, in
// (updated_at, id) order. It reads size candidates at a time on a
// reader connection, without the write lock, and yields their ids; each
// read starts after the last row of the one before, so the rows cond
// passes over are read once a walk, never again for every slice. The
// walk ends after a slice shorter than size.
//
// A slice is what the events were at the read: judge it again under the
// write lock (judgeFinished) before changing anything.
func (s *Store) walkFinished(ctx context.Context, cond string, before int64, size int) iter.Seq2[[]int64, error] {
	q := walkFinishedSQL(cond)
	return func(yield func([]int64, error) bool) {
		afterAt, afterID := int64(math.MinInt64), int64(0)
		for {
			ids, err := func() ([]int64, error) {
				rows, err := s.reader.QueryContext(ctx, q, before, afterAt, afterID, size)
				if err != nil {
					return nil, err
				}
				var ids []int64
				for rows.Next() {
					if err := rows.Scan(&afterID, &afterAt); err != nil {
						rows.Close()
						return nil, err
					}
					ids = append(ids, afterID)
				}
				return ids, closeRows(rows)
			}()
			if err != nil {
				yield(nil, err)
				return
			}
			if len(ids) == 0 || !yield(ids, nil) || len(ids) < size {
				return
			}
		}
	}
}

// walkFinishedSQL reads the next slice of a walk: up to ?4 rows that
// match cond, after the row (updated_at ?2, id ?3). INDEXED BY: it must
// follow events_finished, whose entries are in (updated_at, id) order,
// from that row on.
func walkFinishedSQL(cond string) string {
	return `SELECT id, updated_at FROM events INDEXED BY events_finished
        WHERE ` + finished + ` AND (updated_at > ?2 OR (updated_at = ?2 AND id > ?3)) AND (` + cond + `)
        ORDER BY updated_at, id LIMIT ?4`
}

// judgeFinished returns the ids of a slice walkFinished read that still
// match cond in tx, judged as the read judged them: since the read, a
// replay may have moved one, and its new run ended it after the cutoff,
// or left a delivery of it unfinished. It reads each by its id, so the
// work it does under the write lock is bounded by the slice.
func judgeFinished(ctx context.Context, tx *sql.Tx, cond string, before int64, ids []int64) ([]int64, error) {
	return queryIDs(ctx, tx, judgeFinishedSQL(cond, len(ids)), append([]any{before}, int64sAny(ids)...)...)
}

// judgeFinishedSQL selects which of n ids (?2 on) still match cond. NOT
// INDEXED: by id only, never along a range of events_finished.
func judgeFinishedSQL(cond string, n int) string {
	return `SELECT id FROM events NOT INDEXED WHERE ` + finished + ` AND (` + cond + `)
        AND id IN (` + placeholders(n) + `)`
}

// Stats' queries. statsUnfinished counts the unfinished events by
// status (events_due); statsFresh the dead events (events_dead) and finds
// the oldest due time (argument: now); statsAll counts every event,
// through the (source, delivery_id) index, the narrowest that holds every
// row, and the FanOut records (events_fanout), whose rest are the done
// events: a read of the whole index (a third of a second at three
// million events), which Stats keeps (doneCount).
const (
	statsUnfinished = `SELECT status, count(*) FROM events INDEXED BY events_due
        WHERE status IN ('pending', 'processing') AND NOT fanout GROUP BY status`
	statsFresh = `SELECT
            (SELECT count(*) FROM events INDEXED BY events_dead WHERE status = 'dead' AND NOT fanout),
            (SELECT min(next_attempt_at) FROM events
                WHERE status IN ('pending', 'processing') AND next_attempt_at <= ?)`
	statsAll = `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM events INDEXED BY events_fanout WHERE fanout)`
)

// Stats counts events by status; see hookbox.Ops. It reads indexes, not
// the table, whose rows hold the payloads: the unfinished events through
// events_due and the dead through events_dead (each as many rows as there
// are such events) at each call, in one read transaction, so those
// counts agree. The done events are the rest of a count of every event
// (statsAll), made in the same transaction when it is made: read again
// as package slowcount says: at each call below slowcount.ExactBelow,
// at most every slowcount.Recount above.
func (s *Store) Stats(ctx context.Context, now time.Time) (hookbox.Stats, error) {
	st := hookbox.NewStats()
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, statsUnfinished)
	if err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return st, fmt.Errorf("sqlite: stats: %w", err)
		}
		st.ByStatus[hookbox.Status(name)] = n
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	var dead int
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, statsFresh, millis(now)).Scan(&dead, &oldest); err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	st.ByStatus[hookbox.StatusDead] = dead
	done, err := s.doneCount(ctx, tx, dead+st.ByStatus[hookbox.StatusPending]+st.ByStatus[hookbox.StatusProcessing])
	if err != nil {
		return st, fmt.Errorf("sqlite: stats: %w", err)
	}
	st.ByStatus[hookbox.StatusDone] = done
	st.OldestDue = fromNullMillis(oldest)
	st.OldestDueAge = hookbox.DueAge(st.OldestDue, now)
	return st, nil
}

// doneCount returns the count of done events: the last one while it is
// fresh enough (slowcount), else every event counted in tx less the
// FanOut records and others, the events tx counted in the other statuses.
func (s *Store) doneCount(ctx context.Context, tx *sql.Tx, others int) (int, error) {
	return s.done.Get(func() (int, error) {
		var all, fanout int
		if err := tx.QueryRowContext(ctx, statsAll).Scan(&all, &fanout); err != nil {
			return 0, err
		}
		return all - fanout - others, nil
	})
}

// queryer is a connection pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// queryIDsSplit runs q, which selects an id and whether its payload is
// NULL, and returns the ids with a payload and those without.
func queryIDsSplit(ctx context.Context, db queryer, q string, args ...any) (withPayload, without []int64, err error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var cleared bool
		if err := rows.Scan(&id, &cleared); err != nil {
			return nil, nil, err
		}
		if cleared {
			without = append(without, id)
		} else {
			withPayload = append(withPayload, id)
		}
	}
	return withPayload, without, rows.Err()
}

func queryIDs(ctx context.Context, db queryer, q string, args ...any) ([]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rowscan.IDs(rows)
}

// int64sAny returns ids as statement arguments.
func int64sAny(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// idList is an IN list of the ids in its argument, a JSON array of
// numbers (jsonNumbers), read once: one argument however many ids there
// are.
const idList = `(SELECT value FROM json_each(?))`

// jsonNumbers is ids, or pairs of them, as a JSON array for json_each.
func jsonNumbers[T int64 | [2]int64](v []T) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // numbers always marshal
	}
	return string(b)
}
