package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

// The queue side of the store. Every statement that changes an event is
// guarded by the lease owner (and status) it expects, as on SQLite. Rows are
// locked in id order wherever a statement may wait for a lock, and claims
// skip locked rows instead of waiting, so the queue statements cannot
// deadlock with each other.

var _ hookbox.Queue = (*Store)(nil)

// claimNow is the time a claim is made at: the caller's, else the server's
// (one clock for every process sharing the database).
const claimNow = `COALESCE($3::timestamptz, now())`

// claimSet leases the queue rows of the CTE "due" and returns them with
// their events' data; $1 is the owner, $2 the lease in microseconds. A
// lease runs from when its row is written (clock_timestamp), not from the
// start of the claim's transaction (now()): a claim that waited for its
// lock, or ran long, must not hand out leases already over, which any
// claim could take again at once.
//
// It leases no row of a paused queue (notPaused), and only the rows of
// due within the payload budget
// (hookbox.ClaimParams.MaxPayloadBytes), whose two parameters follow the
// claim's own: budget and first, see withinBudget.
func claimSet(budget, first string) string {
	return `, within AS (` + withinBudget("SELECT id FROM due", budget, first) + `), leased AS (
UPDATE queue SET status = 'processing', attempts = attempts + 1, lease_owner = $1,
    next_attempt_at = COALESCE($3::timestamptz, clock_timestamp()) + $2::bigint * interval '1 microsecond',
    updated_at = ` + claimNow + `
WHERE id IN (SELECT id FROM within)` + notPaused + `
RETURNING *)
SELECT ` + queuedColumns + `, d.payload FROM leased q JOIN event_data d ON d.id = q.id`
}

// notPaused is the condition on a row of queue that its queue is not
// paused (hookbox.Ops.PauseTarget). Claims and picks check pauses in
// their own statement, whatever pauses the worker asking has read: one
// that could not read them (at start, say) still takes nothing of a
// paused queue, and a pause committed before a claim's statement began
// holds for it. The walks over several sources skip a paused one before
// they read it (dueWhereLimit), so that its events take none of the
// claim's limit or budget, nor locks; this check on the rows leased
// covers the claims of one source (strict, by key).
const notPaused = ` AND queue.source NOT IN (SELECT name FROM paused_targets)`

// withinBudget keeps, of the rows of the query ids (a column id), in id
// order, those before the first whose payload would bring the total past
// the parameter budget (a bigint); the first row is kept whatever its
// size when the parameter first (a boolean) is true. octet_length reads a
// stored payload's size from its TOAST pointer, without the payload.
func withinBudget(ids, budget, first string) string {
	return `SELECT id FROM (SELECT u.id,
        sum(coalesce(octet_length(d.payload), 0)) OVER (ORDER BY u.id) AS upto,
        row_number() OVER (ORDER BY u.id) AS n
        FROM (` + ids + `) u JOIN event_data d ON d.id = u.id) w
    WHERE w.upto <= ` + budget + `::bigint OR (w.n = 1 AND ` + first + `::boolean)`
}

// budgetArgs are the arguments of withinBudget for a claim that may take
// budget payload bytes (0: no bound), the first event whatever its size
// when first.
func budgetArgs(budget int64, first bool) []any {
	if budget <= 0 {
		return []any{int64(math.MaxInt64), true}
	}
	return []any{budget, first}
}

// claimDue takes up to $5 due events of the sources $4, skipping rows another
// transaction holds (a concurrent claim, or a Work transaction).
// claimDue picks, per source, the first due events in queue_due order
// (each branch stops at the limit), merges them and leases the first
// $5. A source costs what it returns, however many unfinished events other
// sources hold. Rows a branch locked but the merge left out stay unleased.
var claimDue = `WITH due AS (` + dueIDs + `)` + claimSet("$6", "$7")

// claimDueSkipping is claimDue leaving out the events $6, which the
// claimer runs (hookbox.ClaimParams.RunningIDs): each source's walk passes
// over them, so they neither lock nor count toward its limit. (Left out
// after the walk, running events whose leases had ended, first in due
// order, would fill every claim's limit, and the claims would take nothing
// until they finished.)
var claimDueSkipping = `WITH due AS (SELECT e.id` + dueFrom1 + `q.id, q.next_attempt_at FROM queue q` +
	dueWhere(` AND q.id <> ALL ($6::bigint[])`) + `)` + claimSet("$7", "$8")

// dueIDs is the query behind claimDue: $3 the time, $4 the sources, $5 the
// limit.
var dueIDs = `SELECT e.id` + dueFrom1 + `q.id, q.next_attempt_at FROM queue q` + dueFrom2

// claimDueEach is claimDue with a limit per source
// (hookbox.ClaimParams.Limits), $8, beside $4: each source's walk stops
// at its own, and $5 bounds them all. One statement, one commit, for a
// round that claims many queues a few events each.
var claimDueEach = `WITH due AS (SELECT e.id` + dueEachFrom1("$8") + `q.id, q.next_attempt_at FROM queue q` +
	dueWhereLimit("", "s.lim") + `)` + claimSet("$6", "$7")

// claimDueEachSkipping is claimDueSkipping with a limit per source, $9.
var claimDueEachSkipping = `WITH due AS (SELECT e.id` + dueEachFrom1("$9") + `q.id, q.next_attempt_at FROM queue q` +
	dueWhereLimit(` AND q.id <> ALL ($6::bigint[])`, "s.lim") + `)` + claimSet("$7", "$8")

// dueEachFrom1 is dueFrom1 pairing each source of $4 with its limit, of
// the parameter limits (an integer array as long as $4).
func dueEachFrom1(limits string) string {
	return `
    FROM unnest($4::text[], ` + limits + `::int[]) AS s(source, lim)
    CROSS JOIN LATERAL (
        SELECT `
}

// pickDue locks and reads the events claimDue would lease, without leasing
// them: the transaction's row locks keep every other claim off them until
// it ends (see ClaimWork). It is dueIDs reading whole rows as it locks
// them, rather than ids to look up again. $1 and $2 are unused but typed,
// so the parameters keep claimDue's numbers. The last column is the time
// of the pick.
//
// Of those, it returns the rows within the payload budget ($6 and $7,
// see withinBudget), with two more columns, the running total and the
// row's number. The rows it locked beyond the budget stay locked, not
// leased, until the transaction ends. A paused queue's walk reads and
// locks nothing (dueWhereLimit).
var pickDue = `SELECT * FROM (SELECT p.*,
        sum(coalesce(octet_length(p.payload), 0)) OVER (ORDER BY p.id) AS upto,
        row_number() OVER (ORDER BY p.id) AS n
    FROM (SELECT e.*, ` + claimNow + ` AS picked_at, $1::text AS picked_by, $2::bigint AS picked_lease` +
	dueFrom1 + queuedColumns + `, d.payload FROM queue q JOIN event_data d ON d.id = q.id` + dueFrom2 + `) p
    WHERE p.id NOT IN (` + orphanMarked + `)) w
WHERE w.upto <= $6::bigint OR (w.n = 1 AND $7::boolean)`

// orphanMarked lists the events named by the marks of pools that have no
// record (see hookbox.Queue.OrphanMarks), which pickDue passes over: the
// attempt that was running when such a pool died is charged first
// (queue.Runner.Recover, at the next refresh of any pool's record). A
// dead pool's transaction can hold their rows for minutes after its
// record is gone (until the server notices its host gone); a pick the
// moment they came free ran the event again, and the death was never
// charged. Normally there are none, and the list is read once per pick.
const orphanMarked = `SELECT unnest(m.ids) FROM work_marks m
        WHERE NOT EXISTS (SELECT 1 FROM workers w WHERE w.name = m.worker)`

// dueFrom1 and dueFrom2 are the FROM clause of dueIDs and pickDue, around
// the columns and tables each reads for the due rows it locks (queue rows
// only: event_data rows never change while queued).
const dueFrom1 = `
    FROM unnest($4::text[]) AS s(source)
    CROSS JOIN LATERAL (
        SELECT `

var dueFrom2 = dueWhere("")

// dueWhere is dueFrom2 with the condition and, a conjunction, added to each
// source's walk.
func dueWhere(and string) string { return dueWhereLimit(and, "$5") }

// dueWhereLimit is dueWhere with each source's walk stopping at limit.
func dueWhereLimit(and, limit string) string {
	return `
        WHERE q.source = s.source AND q.status IN ('pending', 'processing') AND q.next_attempt_at <= ` + claimNow + and + `
          AND s.source NOT IN (SELECT name FROM paused_targets)
        ORDER BY q.next_attempt_at, q.id
        LIMIT ` + limit + `
        FOR NO KEY UPDATE OF q SKIP LOCKED
    ) e
    ORDER BY e.next_attempt_at, e.id
    LIMIT $5`
}

// keyHeld is the condition on a delivery that holds its order key.
const keyHeld = `status IN ('pending', 'processing', 'dead')`

// keyWalk is the CTE k(key, n) of claimByKey and walkEnd: the distinct
// order keys of source src held by a delivery, in byte order, from the
// first after key after, numbered n from 0 up to max (max+1 keys).
func keyWalk(src, after, max string) string {
	return `k(key, n) AS (
    SELECT (SELECT order_key COLLATE "C" FROM queue
            WHERE source = ` + src + ` AND order_key COLLATE "C" > ` + after + ` AND order_key IS NOT NULL AND ` + keyHeld + `
            ORDER BY order_key COLLATE "C" LIMIT 1), 0
    UNION ALL
    SELECT (SELECT order_key COLLATE "C" FROM queue
            WHERE source = ` + src + ` AND order_key COLLATE "C" > k.key AND order_key IS NOT NULL AND ` + keyHeld + `
            ORDER BY order_key COLLATE "C" LIMIT 1), k.n + 1
    FROM k WHERE k.key IS NOT NULL AND k.n < ` + max + `
)`
}

// walkEnd finds where a claim by key's walk from $2 ended when it went
// all the way ($3 + 1 keys of source $1): the last key, and whether the
// walk was that long (else it ran out of keys).
var walkEnd = `WITH RECURSIVE ` + keyWalk("$1", "$2", "$3") + `
SELECT key, n = $3 FROM k WHERE key IS NOT NULL ORDER BY n DESC LIMIT 1`

// claimByKey leases, for a claim by order key (hookbox.ClaimParams.ByKey),
// the first delivery of each order key of source $4 after key $6, in key
// order (byte order), that is due and not held by an earlier one, up to $5
// of them. It walks the distinct keys through queue_order (two index
// lookups per key, however many deliveries wait behind each), at most
// $7 + 1 keys (hookbox.ClaimParams.KeyWalk), and skips heads another
// transaction holds, and keys in $8 (hookbox.ClaimParams.RunningKeys)
// without probing them.
//
// A key none of whose deliveries is leased is free; the first by id is
// not enough. Ids are drawn before commit, so a delivery can become
// visible after a later one of its key was claimed (another process's
// ingest, or ingest.flushers), and a replay can put an earlier one back
// while a later one runs: either heads its key, and waits here
// (queue_leased_keys, one probe per key) until the running one ends. Two
// claims whose snapshots saw different heads could still lease one each;
// serialLock, taken before the claim's snapshot, keeps that from happening
// (see Store.claimByKey).
func claimByKey(skipDead bool) string {
	head := keyHeld
	if skipDead {
		head += ` AND status <> 'dead'`
	}
	return `WITH RECURSIVE ` + keyWalk("$4", "$6", "$7") + `, due AS (
    SELECT e.id FROM k
    CROSS JOIN LATERAL (SELECT id FROM queue
        WHERE source = $4 AND order_key COLLATE "C" = k.key AND order_key IS NOT NULL AND ` + head + `
        ORDER BY id LIMIT 1) h
    JOIN queue e ON e.id = h.id
    WHERE k.key IS NOT NULL AND k.key <> ALL (coalesce($8::text[], '{}'))
      AND e.status IN ('pending', 'processing') AND e.next_attempt_at <= ` + claimNow + `
      AND NOT EXISTS (SELECT 1 FROM queue b
          WHERE b.source = $4 AND b.order_key COLLATE "C" = k.key AND b.order_key IS NOT NULL
            AND b.status = 'processing' AND b.next_attempt_at > ` + claimNow + `)
    LIMIT $5
    FOR NO KEY UPDATE OF e SKIP LOCKED
)` + claimSet("$9", "$10")
}

var claimStrict = `WITH first AS (
    SELECT id FROM queue
    WHERE source = $4 AND status IN ('pending', 'processing') AND next_attempt_at <= ` + claimNow + `
      AND NOT EXISTS (SELECT 1 FROM queue
          WHERE source = $4 AND status IN ('pending', 'processing')
            AND status = 'processing' AND next_attempt_at > ` + claimNow + `)
    ORDER BY id LIMIT 1
), due AS (
    SELECT id FROM queue
    WHERE id = (SELECT id FROM first)
      AND status IN ('pending', 'processing') AND next_attempt_at <= ` + claimNow + `
    FOR NO KEY UPDATE SKIP LOCKED
)` + claimSet("$5", "$6")

// serialLock serializes the claims of one queue ($1) across processes
// until the end of the transaction, for the claims that must see each
// other's leases: strict ones, and claims by key. Under READ COMMITTED the
// claim that follows it in the transaction takes its snapshot once the
// lock is granted, so it sees every lease the claims before it made.
// The lock's name predates claims by key and stays: a process of an
// older release, sharing the database during an upgrade, takes the same
// lock for its strict claims.
const serialLock = `SELECT pg_advisory_xact_lock(hashtext('hookbox-strict:' || current_schema() || ':' || $1))`

// Claim leases due events; see hookbox.Queue. A plain claim is one
// statement (one round trip); a strict claim sends the advisory lock and the
// claim together in one implicit transaction (one round trip).
func (s *Store) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	if p.Limits != nil && len(p.Limits) != len(p.Sources) {
		return nil, fmt.Errorf("postgres: claim: %d limits for %d sources", len(p.Limits), len(p.Sources))
	}
	var now any
	if !p.Now.IsZero() {
		now = p.Now
	}
	lease := p.Lease.Microseconds()
	var out []hookbox.Event
	var err error
	if p.Strict {
		out, err = s.claimStrict(ctx, p.Owner, lease, now, p.Sources[0])
	} else {
		var rows pgx.Rows
		budget := budgetArgs(p.MaxPayloadBytes, true)
		if p.ByKey {
			out, err = s.claimByKey(ctx, p, lease, now)
		} else if p.Limits != nil {
			out, err = s.claimEach(ctx, p, lease, now, budget)
		} else if len(p.RunningIDs) > 0 {
			if rows, err = s.pool.Pool.Query(ctx, claimDueSkipping, append([]any{p.Owner, lease, now, p.Sources, p.Limit, p.RunningIDs}, budget...)...); err == nil {
				out, err = scanEvents(rows)
			}
		} else if rows, err = s.pool.Pool.Query(ctx, claimDue, append([]any{p.Owner, lease, now, p.Sources, p.Limit}, budget...)...); err == nil {
			out, err = scanEvents(rows)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if err != nil {
		// What a committed part of the claim leased is returned with the
		// error (see hookbox.Queue.Claim).
		return out, unavailable(ctx, "claim", err)
	}
	return out, nil
}

// claimEach runs claimDueEach, or claimDueEachSkipping when p has
// RunningIDs: a plain claim with a limit per source.
func (s *Store) claimEach(ctx context.Context, p hookbox.ClaimParams, lease int64, now any, budget []any) ([]hookbox.Event, error) {
	limits := make([]int32, len(p.Limits))
	for i, n := range p.Limits {
		limits[i] = int32(min(max(n, 0), math.MaxInt32))
	}
	q, args := claimDueEach, append([]any{p.Owner, lease, now, p.Sources, p.Limit}, budget...)
	if len(p.RunningIDs) > 0 {
		q, args = claimDueEachSkipping, append([]any{p.Owner, lease, now, p.Sources, p.Limit, p.RunningIDs}, budget...)
	}
	rows, err := s.pool.Query(ctx, q, append(args, limits)...)
	if err != nil {
		return nil, err
	}
	return scanEvents(rows)
}

// claimByKey runs claimByKey from p.AfterKey and, when that leaves part
// of the limit, again from the first key (wrapping around). Each runs
// after serialLock, in a transaction of its own: a delivery leased by the
// first is held by then, and by every claim of the queue after it.
func (s *Store) claimByKey(ctx context.Context, p hookbox.ClaimParams, lease int64, now any) ([]hookbox.Event, error) {
	q := claimByKey(p.SkipDead)
	var out []hookbox.Event
	var used int64 // payload bytes the first claim took
	for _, after := range []string{p.AfterKey, ""} {
		budget := budgetArgs(p.MaxPayloadBytes-used, used == 0)
		evs, err := s.claimSerial(ctx, p.Sources[0], q, append([]any{p.Owner, lease, now, p.Sources[0], p.Limit - len(out), after, p.KeyWalk() - 1, p.RunningKeys}, budget...)...)
		out = append(out, evs...)
		for _, e := range evs {
			used += int64(len(e.Payload))
		}
		if err != nil || len(out) >= p.Limit || p.MaxPayloadBytes > 0 && used >= p.MaxPayloadBytes {
			return out, err
		}
		if p.AfterKey == "" {
			break
		}
	}
	if p.KeyCursor != nil {
		return out, s.keyCursor(ctx, p)
	}
	return out, nil
}

// keyCursor finds p.KeyCursor (hookbox.ClaimParams.FindKeyCursor) after
// the claims, outside the lock.
func (s *Store) keyCursor(ctx context.Context, p hookbox.ClaimParams) error {
	return p.FindKeyCursor(func(after string) (last string, full bool, err error) {
		err = s.pool.Pool.QueryRow(ctx, walkEnd, p.Sources[0], after, p.KeyWalk()-1).Scan(&last, &full)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return last, full, err
	})
}

// unkeyed reads up to $2 unfinished deliveries of queue $1 without an
// order key, with their delivery ids, first due first. It walks
// queue_due: every unfinished delivery of the queue, which is why claims
// by key leave this to FillOrderKeys.
// Each round starts after the last row the one before read (the cursor
// $3, $4), so a pass reads the queue's index once
// rather than once per round past the rows it has already keyed.
const unkeyed = `SELECT q.id, d.delivery_id, q.next_attempt_at FROM queue q JOIN event_data d ON d.id = q.id
WHERE q.source = $1 AND (q.next_attempt_at, q.id) > ($3, $4)
  AND q.order_key IS NULL AND q.status IN ('pending', 'processing')
ORDER BY q.next_attempt_at, q.id LIMIT $2`

// fillKeys gives the deliveries $1 the order keys $2, each only while it
// has none. It locks in id order and skips rows another statement holds.
const fillKeys = `WITH v(id, key) AS (SELECT * FROM unnest($1::bigint[], $2::text[])),
free AS (SELECT q.id FROM queue q WHERE q.id IN (SELECT id FROM v) AND q.order_key IS NULL
    ORDER BY q.id FOR NO KEY UPDATE SKIP LOCKED)
UPDATE queue q SET order_key = v.key FROM v WHERE q.id = v.id AND q.id IN (SELECT id FROM free)`

// fillBatch is how many deliveries one round of FillOrderKeys keys.
const fillBatch = 1000

// FillOrderKeys gives the unfinished deliveries of queue without an order
// key one each; see hookbox.Queue.
func (s *Store) FillOrderKeys(ctx context.Context, queue string, key func(deliveryID string) string) (int, error) {
	total := 0
	var afterDue time.Time // year 1: before every row
	var afterID int64
	for {
		rows, err := s.pool.Pool.Query(ctx, unkeyed, queue, fillBatch, afterDue, afterID)
		if err != nil {
			return total, unavailable(ctx, "fill order keys", err)
		}
		var ids []int64
		var keys []string
		for rows.Next() {
			var id int64
			var deliveryID string
			var due time.Time
			if err := rows.Scan(&id, &deliveryID, &due); err != nil {
				rows.Close()
				return total, unavailable(ctx, "fill order keys", err)
			}
			ids, keys = append(ids, id), append(keys, key(deliveryID))
			afterDue, afterID = due, id
		}
		if err := rows.Err(); err != nil {
			return total, unavailable(ctx, "fill order keys", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		tag, err := s.pool.Pool.Exec(ctx, fillKeys, ids, keys)
		if err != nil {
			return total, opError(ctx, "fill order keys", err)
		}
		total += int(tag.RowsAffected())
		// A full batch may have more behind it. Rows another statement
		// held are left for the next call; the cursor moves past them.
		if len(ids) < fillBatch {
			return total, nil
		}
	}
}

func (s *Store) claimStrict(ctx context.Context, owner string, lease int64, now any, source string) ([]hookbox.Event, error) {
	// One event at most: no payload budget to apply.
	return s.claimSerial(ctx, source, claimStrict, append([]any{owner, lease, now, source}, budgetArgs(0, true)...)...)
}

// claimSerial runs the claim statement q with args after serialLock on
// queue, in one round trip.
func (s *Store) claimSerial(ctx context.Context, queue, q string, args ...any) ([]hookbox.Event, error) {
	// A batch outside an explicit transaction runs in one implicit
	// transaction (one Sync): the advisory lock is held until the claim has
	// committed. Under READ COMMITTED each statement takes its own snapshot,
	// so the claim's is taken after the lock was granted.
	b := &pgx.Batch{}
	b.Queue(serialLock, queue)
	b.Queue(q, args...)
	br := s.pool.Pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	var out []hookbox.Event
	if err == nil {
		out, err = scanEvents(rows)
	}
	// Close reads to the end of the batch: only then is the commit known.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err // not known to have committed: nothing is ours
	}
	return out, nil
}

func scanEvents(rows pgx.Rows) ([]hookbox.Event, error) {
	defer rows.Close()
	var out []hookbox.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err // the statement failed: what it returned is not leased
	}
	return out, nil
}

// fromNow is t as a distance from this host's clock now, in microseconds,
// for a statement to add to the database's clock (dbClock). Processes on
// several hosts share one database, and their clocks differ from its clock
// (and from each other's) by seconds or minutes, while claims judge lease
// ends and due times by the database's (now()): a time this host computes
// (a lease's end, a retry's due time, a cut-off) is written or compared on
// the database's clock, at the distance from it the host meant, so that
// every process judges it alike whatever its own clock reads. A zero t
// (no time set) is as far in the past as a Duration reaches.
func fromNow(t time.Time) int64 { return time.Until(t).Microseconds() }

// dbClock is the SQL for a time sent as fromNow in param (a bigint): that
// distance from the database's clock at the write (clock_timestamp), so a
// statement that waited for a lock does not shorten what it writes.
func dbClock(param string) string {
	return `clock_timestamp() + ` + param + ` * interval '1 microsecond'`
}

// dbNow is dbClock from the start of the statement (statement_timestamp)
// rather than the write: one value for the whole statement, stable, so an
// index can serve a comparison with it; and the statement's, not its
// transaction's (now()), which a work transaction began before its
// handlers ran. It is how a time the caller passes as "now", as a cut-off
// (a retention window's start, the time that decides what is due) or as
// a stamp (when an attempt ended, when an event was received) is judged
// and written: the distance the caller meant from its own clock, on the
// database's, the clock every process shares (fromNow). A host whose
// clock is off then judges rows that other hosts and the server stamped
// as a host whose clock is right would, and stamps its own as they do.
func dbNow(param string) string {
	return `(statement_timestamp() + ` + param + ` * interval '1 microsecond')`
}

// extendLeases locks the rows in id order before updating them, as every
// statement here that may wait does. As a claim's, the new end counts
// from the write, on the database's clock: $1 is the lease left, fromNow.
var extendLeases = `UPDATE queue SET next_attempt_at = ` + dbClock("$1::bigint") + `
WHERE id IN (
    SELECT id FROM queue
    WHERE id = ANY($3::bigint[]) AND lease_owner = $2 AND status = 'processing'
    ORDER BY id
    FOR NO KEY UPDATE
) AND lease_owner = $2 AND status = 'processing'`

// ExtendLeases moves the lease end of events still held by owner; one
// statement.
func (s *Store) ExtendLeases(ctx context.Context, owner string, ids []int64, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Pool.Exec(ctx, extendLeases, fromNow(until), owner, ids); err != nil {
		return unavailable(ctx, "extend leases", err)
	}
	return nil
}

// outcomeRows reads the arrays of a finishBatch as the rows o of
// finishOutcomes and finishPicked, numbered n from 1. given is 1 for an
// attempt given back (hookbox.Outcome.Released), else 0: what the finish
// adds to attempt_base. next_in is the event's next due time as fromNow;
// nextAt writes it on the database's clock. started and finished stay
// the worker's own stamps: they are what its attempt's record shows.
// finished_in is finished as fromNow (how long ago the attempt ended, by
// the worker's clock): finishedAt writes the event's updated_at from it
// on the database's clock.
const outcomeRows = `
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[],
        $6::bigint[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::boolean[], $11::integer[], $12::bigint[])
        WITH ORDINALITY AS o(id, owner, attempt, status, outcome, next_in, error, started, finished, stored, given, finished_in, n)`

// nextAt is the next_attempt_at an outcome row o sets.
var nextAt = dbClock("o.next_in")

// lastError is the last_error an outcome row o sets: its error, none
// for a done one (a done attempt did not fail, whatever text the outcome
// carries; its attempt row keeps the text), as SQLite's finish does.
const lastError = `CASE WHEN o.status = 'done' THEN NULL ELSE NULLIF(o.error, '') END`

// takenBack is what the finish takes back of the attempt count an
// outcome row o's claim made: 1 for an event ended without running
// (hookbox.Outcome.NotRun, whose outcome is AttemptNotRun), else 0. It is
// read from the outcome the row carries anyway, so the finish of every
// other outcome sends nothing more.
const takenBack = `(o.outcome = '` + hookbox.AttemptNotRun + `')::int`

// finishedAt is the updated_at an outcome row o sets: when the attempt
// ended, on the database's clock, as every other write of updated_at is
// (a claim's, a replay's, a retire's). A purge and payload retention
// judge finished rows by it against a cut-off on that clock too: stamped
// with the finishing worker's own clock, as it was, a host ahead of the
// others pushed its rows out of the window late, and one behind made
// them look old to every purge.
var finishedAt = dbNow("o.finished_in")

// finishOutcomes applies a batch of outcomes and records their attempts in
// one statement. It returns the ordinals (1-based positions in the arrays)
// of the outcomes that were applied; the others were refused, and their
// attempt rows say "lost", numbered as claimed. $10 says, per outcome,
// whether its attempt gets a row if applied (hookbox.AttemptStored); a
// lost attempt always does. An event ended without running has its
// claim's count taken back (takenBack), and its row numbered after the
// last attempt made (hookbox.Outcome.AttemptsAfter).
//
// held locks the events concerned in id order first, so a concurrent
// finish, lease extension or Work transaction cannot deadlock with this one,
// and no event can be deleted between the check and the insert of its
// attempt rows: attempts of events already gone are skipped instead of
// violating the foreign key.
var finishOutcomes = `WITH o AS (` + outcomeRows + `
), held AS (
    SELECT id FROM queue WHERE id IN (SELECT id FROM o) ORDER BY id FOR NO KEY UPDATE
), applied AS (
    UPDATE queue e SET status = o.status, attempts = e.attempts - ` + takenBack + `,
        attempt_base = e.attempt_base + o.given, lease_owner = NULL,
        next_attempt_at = ` + nextAt + `, last_error = ` + lastError + `, updated_at = ` + finishedAt + `
    FROM o
    WHERE e.id = o.id AND e.lease_owner = o.owner AND e.attempts = o.attempt
      AND e.status = 'processing' AND e.id IN (SELECT id FROM held)
    RETURNING o.n
), recorded AS (
    INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
    SELECT o.id, CASE WHEN applied.n IS NULL THEN o.attempt ELSE o.attempt - ` + takenBack + ` END, o.owner,
        CASE WHEN applied.n IS NULL THEN 'lost' ELSE o.outcome END,
        NULLIF(o.error, ''), o.started, o.finished
    FROM o LEFT JOIN applied ON applied.n = o.n
    WHERE o.id IN (SELECT id FROM held) AND (applied.n IS NULL OR o.stored)
    ORDER BY o.n
)
SELECT n FROM applied`

// rowScanner is what pgx.Rows and *sql.Rows have in common.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// finishBatch is a set of outcomes prepared for finishOutcomes.
type finishBatch struct {
	index []int // index[k] is the position in the caller's slice of array element k+1
	args  []any
}

// newFinishBatch prepares the outcomes at positions idx of outs.
func newFinishBatch(outs []hookbox.Outcome, idx []int) finishBatch {
	n := len(idx)
	var (
		ids                 = make([]int64, n)
		owners              = make([]string, n)
		attempts            = make([]int32, n)
		statuses, outcomes  = make([]string, n), make([]string, n)
		nexts               = make([]int64, n)
		msgs                = make([]string, n)
		starteds, finisheds = make([]time.Time, n), make([]time.Time, n)
		stored              = make([]bool, n)
		given               = make([]int32, n)
		finishedIn          = make([]int64, n)
	)
	// One now for the batch: outcomes that finished at one time keep one
	// updated_at (a purge reads the rows of one time together).
	now := time.Now()
	for k, i := range idx {
		o := &outs[i]
		next := o.NextAttemptAt()
		ids[k], owners[k], attempts[k] = o.ID, o.Owner, int32(o.Attempt)
		statuses[k], outcomes[k] = string(o.Status), o.AttemptOutcome()
		nexts[k], msgs[k], starteds[k], finisheds[k] = fromNow(next), storableText(o.Error), o.StartedAt, o.FinishedAt
		finishedIn[k] = o.FinishedAt.Sub(now).Microseconds() // fromNow, from the batch's now
		stored[k] = hookbox.AttemptStored(o.Attempt, outcomes[k])
		if outcomes[k] == hookbox.AttemptReleased {
			given[k] = 1
		}
	}
	return finishBatch{index: idx, args: []any{ids, owners, attempts, statuses, outcomes, nexts, msgs, starteds, finisheds, stored, given, finishedIn}}
}

// result sets errs[i] to ErrLeaseLost for every outcome of the batch that
// rows (the result of finishOutcomes) does not report applied.
func (b finishBatch) result(rows rowScanner, errs []error) error {
	applied := make([]bool, len(b.index))
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return err
		}
		if n < 1 || n > int64(len(applied)) {
			return fmt.Errorf("finish returned ordinal %d of %d", n, len(applied))
		}
		applied[n-1] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, i := range b.index {
		if !applied[k] {
			errs[i] = hookbox.ErrLeaseLost
		}
	}
	return nil
}

// toApply lists the positions of the outcomes that say how an attempt ended;
// an empty Status means the event was not run and there is nothing to apply.
func toApply(outs []hookbox.Outcome, among []int) []int {
	var idx []int
	for _, i := range among {
		if outs[i].Status != "" {
			idx = append(idx, i)
		}
	}
	return idx
}

// Finish applies outcomes in one transaction and records each attempt; see
// hookbox.Queue. It is one statement (one round trip). Outcomes with an
// empty Status are not applied and get no error.
func (s *Store) Finish(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	errs, err := applyOutcomes(outs, func(args []any) (rowScanner, func(), error) {
		rows, err := s.pool.Pool.Query(ctx, finishOutcomes, args...)
		return rows, func() { rows.Close() }, err
	})
	if err != nil {
		return nil, unavailable(ctx, "finish", err)
	}
	return errs, nil
}

// applyOutcomes runs a finish statement (finishOutcomes, finishPicked)
// through query over the outcomes that say how an attempt ended, and
// returns one error per outcome: ErrLeaseLost where it was refused.
func applyOutcomes(outs []hookbox.Outcome, query func(args []any) (rowScanner, func(), error)) ([]error, error) {
	errs := make([]error, len(outs))
	all := make([]int, len(outs))
	for i := range all {
		all[i] = i
	}
	idx := toApply(outs, all)
	if len(idx) == 0 {
		return errs, nil
	}
	b := newFinishBatch(outs, idx)
	rows, done, err := query(b.args)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := b.result(rows, errs); err != nil {
		return nil, err
	}
	return errs, nil
}

// finishPicked is finishOutcomes for events picked, not leased, by this
// transaction (see ClaimWork): its row locks are the guard, and the finish
// also counts the attempt, unless the event was ended without running
// (takenBack).
var finishPicked = `WITH o AS (` + outcomeRows + `
), applied AS (
    UPDATE queue e SET status = o.status, attempts = e.attempts + 1 - ` + takenBack + `,
        attempt_base = e.attempt_base + o.given,
        lease_owner = NULL, next_attempt_at = ` + nextAt + `, last_error = ` + lastError + `, updated_at = ` + finishedAt + `
    FROM o
    WHERE e.id = o.id
    RETURNING o.n
), recorded AS (
    INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
    SELECT o.id, o.attempt - ` + takenBack + `, o.owner, o.outcome, NULLIF(o.error, ''), o.started, o.finished
    FROM o WHERE o.stored ORDER BY o.n
)
SELECT n FROM applied`

// leasePicked leases the events $3 picked by this transaction that were
// left unrun, as claimDue would have: owner $1, the lease ending $2
// microseconds from now and updated $4 microseconds from now (negative:
// before), both on the server's clock, as every queue time is.
var leasePicked = `UPDATE queue SET status = 'processing', attempts = attempts + 1,
    lease_owner = $1, next_attempt_at = ` + dbClock("$2::bigint") + `, updated_at = ` + dbClock("$4::bigint") + `
WHERE id = ANY($3::bigint[])`

// attemptsSQL lists an event's ($1) attempts, each with its kind (k):
// first the event's row itself (k -1: its attempt count as attempt, its
// status as outcome, for hookbox.WithUnknown), then its first attempt
// when it succeeded on it, which has no row (hookbox.AttemptStored) and
// is read from the event, then its rows in the order they were written.
// One statement, so all of it is read from one snapshot.
const attemptsSQL = `SELECT k, attempt, owner, outcome, error, started_at, finished_at FROM (
    SELECT -1 AS k, 0::bigint AS id, attempts AS attempt, '' AS owner, status AS outcome,
        NULL::text AS error, updated_at AS started_at, updated_at AS finished_at
    FROM events WHERE id = $1
    UNION ALL
    SELECT 0, 0::bigint, 1, '', '` + hookbox.AttemptDone + `', NULL::text, updated_at, updated_at
    FROM events WHERE id = $1 AND ` + impliedFirstAttempt + `
    UNION ALL
    SELECT 1, id, attempt, owner, outcome, error, started_at, finished_at FROM attempts WHERE event_id = $1) a
ORDER BY k, id`

// impliedFirstAttempt holds for an event row whose first attempt
// succeeded and has no attempts row (hookbox.AttemptStored): one done
// after that one attempt. Attempt numbers go on across replays, and a
// replay writes this row down first, so only attempt 1 is ever implied.
// An event done after more attempts whose first left no row is not
// matched: that attempt died with its process, and is listed as unknown
// (hookbox.WithUnknown), never as done. Rows stored before that rule
// have one, and are not matched.
const impliedFirstAttempt = `events.status = 'done' AND events.attempts = 1
    AND NOT EXISTS (SELECT 1 FROM attempts f WHERE f.event_id = events.id AND f.attempt = 1)`

// Attempts lists the attempts at one event, oldest first; see
// hookbox.Queue.
func (s *Store) Attempts(ctx context.Context, eventID int64) ([]hookbox.Attempt, error) {
	rows, err := s.pool.Query(ctx, attemptsSQL, eventID)
	if err != nil {
		return nil, queryError("attempts", err)
	}
	defer rows.Close()
	var out []hookbox.Attempt
	var count int
	var status hookbox.Status
	for rows.Next() {
		var a hookbox.Attempt
		var k int
		var msg *string
		if err := rows.Scan(&k, &a.Attempt, &a.Owner, &a.Outcome, &msg, &a.StartedAt, &a.FinishedAt); err != nil {
			return nil, queryError("attempts", err)
		}
		if k < 0 { // the event's own row: its count and status
			count, status = a.Attempt, hookbox.Status(a.Outcome)
			continue
		}
		if msg != nil {
			a.Error = *msg
		}
		a.StartedAt, a.FinishedAt = a.StartedAt.UTC(), a.FinishedAt.UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError("attempts", err)
	}
	return hookbox.WithUnknown(out, count, status), nil
}

// unavailable reports a failure of a queue statement or of its commit as
// hookbox.ErrUnavailable. When ctx has ended, the error matches ctx's error
// too, so callers can tell a shutdown from an outage; when the server
// refused a connection for its limit, it matches
// hookbox.ErrTooManyConnections.
func unavailable(ctx context.Context, op string, err error) error {
	if tooManyConnections(err) {
		return fmt.Errorf("postgres: %s: %w: %w: %w", op, hookbox.ErrUnavailable, hookbox.ErrTooManyConnections, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("postgres: %s: %w: %v (%w)", op, hookbox.ErrUnavailable, err, cerr)
	}
	return fmt.Errorf("postgres: %s: %w: %w", op, hookbox.ErrUnavailable, err)
}

// workerStarted records a running pool and counts the others, in one
// statement.
// workerStarted lists the other pools' records and adds (or refreshes) the
// caller's, in one statement.
const workerStarted = `WITH mine AS (INSERT INTO workers (name, host, pid) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO UPDATE SET seen_at = now())
SELECT name, host, pid FROM workers WHERE name <> $1`

// WorkerStarted records a running pool; see hookbox.Queue.
func (s *Store) WorkerStarted(ctx context.Context, w hookbox.Worker) ([]hookbox.Worker, error) {
	rows, err := s.pool.Pool.Query(ctx, workerStarted, w.Name, w.Host, w.PID)
	if err != nil {
		return nil, unavailable(ctx, "worker started", err)
	}
	others, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (hookbox.Worker, error) {
		var o hookbox.Worker
		err := row.Scan(&o.Name, &o.Host, &o.PID)
		return o, err
	})
	if err != nil {
		return nil, unavailable(ctx, "worker started", err)
	}
	return others, nil
}

// workerSeen refreshes a pool's record and deletes stale ones, in one
// statement; $2 is the staleness in microseconds.
const workerSeen = `WITH seen AS (INSERT INTO workers (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET seen_at = now()),
dead AS (DELETE FROM workers WHERE name <> $1 AND seen_at < now() - $2::bigint * interval '1 microsecond' RETURNING 1)
SELECT count(*) FROM dead`

// WorkerSeen refreshes a pool's record and drops stale ones; see
// hookbox.Queue.
func (s *Store) WorkerSeen(ctx context.Context, name string, staleAfter time.Duration) (int, error) {
	var dead int64
	if err := s.pool.Pool.QueryRow(ctx, workerSeen, name, staleAfter.Microseconds()).Scan(&dead); err != nil {
		return 0, unavailable(ctx, "worker seen", err)
	}
	return int(dead), nil
}

// WorkerStopped deletes a pool's record; see hookbox.Queue.
func (s *Store) WorkerStopped(ctx context.Context, name string) error {
	if _, err := s.pool.Pool.Exec(ctx, `DELETE FROM workers WHERE name = $1`, name); err != nil {
		return unavailable(ctx, "worker stopped", err)
	}
	return nil
}

// storableText makes an attempt's error text fit a text column: what a
// target or handler said may hold invalid UTF-8 or NUL, which PostgreSQL
// refuses, and an outcome that cannot be written leaves its event to be
// run again and again.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
