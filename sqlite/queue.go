package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.Queue = (*Store)(nil)

// Claim leases due events; see hookbox.Queue. Under the FULL promise it
// returns them only once the claim's commit is on disk, and with it every
// commit before it (see walSyncer), and in any mode only while the
// database path names the file the claim went into (see fileGuard); if
// that cannot be known, it returns none and an error wrapping
// hookbox.ErrUnavailable.
//
// The write transaction picks the events, leases them (leaseTx) and reads
// the payloads of at most inTxPayload bytes; larger ones are read after
// the commit, on a reader (readLarge): the events are leased to this
// claim by then, and the one writer is not held while megabytes are
// copied. An event whose payload cannot be read there is not returned:
// it is given its attempt back and is due again in a second, later after
// several in a row, and dead after maxGiveBacks of them (giveBack); the
// others are returned with the error.
func (s *Store) Claim(ctx context.Context, p hookbox.ClaimParams) ([]hookbox.Event, error) {
	if len(p.Sources) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	if p.Limits != nil && len(p.Limits) != len(p.Sources) {
		return nil, fmt.Errorf("sqlite: claim: %d limits for %d sources", len(p.Limits), len(p.Sources))
	}
	var out []hookbox.Event
	var large []int64
	var err error
	// The leases start after this (once the writer is ours), or at p.Now:
	// the read of large payloads gives up halfway through them, so no
	// event is handed out with a lease about to end, or ended.
	leaseFrom := p.Now
	if leaseFrom.IsZero() {
		leaseFrom = time.Now()
	}
	readBy := leaseFrom.Add(p.Lease / 2)
	out, large, err = s.claimParts(ctx, claimSplit(p))
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	var lerr error
	if len(large) > 0 {
		all := slices.Clone(out) // readLarge filters out in place
		if out, lerr = s.readLarge(ctx, out, large, readBy); lerr != nil {
			s.giveBack(ctx, all, out, lerr)
		}
	}
	if len(out) > 0 {
		// No event is handed to a worker before its claim is on disk (see
		// walSyncer), in the file the database path names (fileGuard).
		// When that fails, the events stay leased to nobody until their
		// leases end: working them would be the very thing this wait is
		// for.
		if err := s.settle(); err != nil {
			return nil, fmt.Errorf("sqlite: claim: %w", err)
		}
	}
	if lerr != nil {
		return out, fmt.Errorf("sqlite: claim: %w", lerr)
	}
	if p.ByKey && p.KeyCursor != nil && len(out) < p.Limit {
		// After the commit, on a reader: the one writer does not wait
		// for this walk.
		if err := s.keyCursor(ctx, p); err != nil {
			return out, fmt.Errorf("sqlite: claim: key cursor: %w", err)
		}
	}
	return out, nil
}

// giveBack releases the events of claimed that are not in kept (their
// payloads could not be read after the claim; why says why), rather than
// leave them to wait out their leases with an attempt spent, which a long
// read holding every reader would otherwise cost them again at every
// claim, until they died untried. If this fails too, they wait for their
// leases to end, as before.
//
// The release is bounded: a payload that cannot be read claim after claim
// (every reader held for an hour, a row whose read fails every time) came
// round every two or three seconds for ever, an attempts row each time,
// never worked and never dead. The event's own attempts rows decide
// (giveBackRun): after n give-backs in a row, the next one also gets its
// attempt back, and is due again in giveBackDelay(n), a second doubled
// each time up to maxGiveBackDelay; the failure after maxGiveBacks of
// them ends the event dead (its attempt counted), saying why, for the
// operator to replay once its payload can be read (a replay starts a new
// run). An event whose payload is read at last is worked with every
// give-back refunded: readers busy for a while never cost a healthy event
// its retry budget. The worker's retry policy cannot be the bound: it
// never sees an event given back, and one given back with its attempts
// counted would, once read, be refused unrun as one whose worker died.
//
// The runs are read, and the outcomes applied, in one write transaction,
// under the claim's leases (finishTx's guard).
func (s *Store) giveBack(ctx context.Context, claimed, kept []hookbox.Event, why error) {
	var back []hookbox.Event
	for _, e := range claimed {
		if !slices.ContainsFunc(kept, func(k hookbox.Event) bool { return k.ID == e.ID }) {
			back = append(back, e)
		}
	}
	if len(back) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	outs := make([]hookbox.Outcome, len(back))
	var errs []error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		for i, e := range back {
			n, err := giveBackRun(ctx, tx, e.ID)
			if err != nil {
				return err
			}
			o := hookbox.Outcome{ID: e.ID, Owner: e.LeaseOwner, Attempt: e.Attempts,
				Status: hookbox.StatusPending, Released: true, RetryAt: now.Add(giveBackDelay(n)),
				Error: giveBackPrefix + why.Error(), StartedAt: now, FinishedAt: now}
			if n >= maxGiveBacks {
				o.Status, o.Released, o.RetryAt = hookbox.StatusDead, false, time.Time{}
				o.Error = fmt.Sprintf("its payload could not be read after its claim %d times in a row, the last: %v; "+
					"not claimed again until it is replayed", n+1, why)
			}
			outs[i] = o
		}
		var err error
		errs, err = s.finishTx(ctx, tx, outs, true)
		return err
	})
	if err != nil {
		return
	}
	f := s.onDead.Load()
	for i, o := range outs {
		if o.Status == hookbox.StatusDead && errs[i] == nil {
			s.log.Error("sqlite: event dead", "event_id", o.ID, "source", back[i].Source, "attempt", o.Attempt, "err", o.Error)
			if f != nil {
				(*f)(&back[i], o)
			}
		}
	}
}

// OnDead makes the store call f, after the commit, for each event it ends
// dead itself, with the outcome it recorded: an event whose payload could
// not be read after its claims (see Claim and giveBack). The workers
// never see such an event, so the deaths they count (hookbox_dead_total
// and its alert) would leave it out; hookbox serve passes these to the
// same count. f must not block. Nil stops the calls. Safe to call while
// the store is in use.
func (s *Store) OnDead(f func(ev *hookbox.Event, o hookbox.Outcome)) {
	if f == nil {
		s.onDead.Store(nil)
		return
	}
	s.onDead.Store(&f)
}

// giveBackPrefix starts the error of an attempt given back by giveBack.
const giveBackPrefix = "its payload could not be read after its claim: "

// maxGiveBacks is how many give-backs in a row an event gets; the next
// failure to read its payload ends it dead. With giveBackDelay, the run
// lasts about an hour: 1 s doubled up to 256 s, then eleven of 5 min.
const maxGiveBacks = 20

// maxGiveBackDelay caps giveBackDelay.
const maxGiveBackDelay = 5 * time.Minute

// giveBackDelay is how long an event given back after n give-backs in a
// row waits before it is due again: a second, doubled each time, at most
// maxGiveBackDelay.
func giveBackDelay(n int) time.Duration {
	if n >= 16 {
		return maxGiveBackDelay
	}
	return min(time.Second<<n, maxGiveBackDelay)
}

// giveBackRunSQL reads the last attempts rows of an event (argument 1),
// newest first, at most argument 2 of them (a replay's mark, written
// after the attempt it bears the number of, before it).
const giveBackRunSQL = `SELECT outcome, coalesce(error, '') FROM attempts WHERE event_id = ?
        ORDER BY attempt DESC, id DESC LIMIT ?`

// giveBackRun counts the give-backs in a row at the end of event id's
// attempts rows, up to maxGiveBacks: the released attempts whose error
// is giveBack's, after every other row (an attempt that ran, a release
// at shutdown, a replay).
func giveBackRun(ctx context.Context, tx *sql.Tx, id int64) (int, error) {
	rows, err := tx.QueryContext(ctx, giveBackRunSQL, id, maxGiveBacks)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var outcome, msg string
		if err := rows.Scan(&outcome, &msg); err != nil {
			return 0, err
		}
		if outcome != hookbox.AttemptReleased || !strings.HasPrefix(msg, giveBackPrefix) {
			break
		}
		n++
	}
	return n, rows.Err()
}

// maxUnion is how many sources one claim statement walks. Each is a part
// of a compound SELECT, and SQLite refuses a compound of more than 500
// (SQLITE_MAX_COMPOUND_SELECT).
const maxUnion = 400

// splitSources splits a plain claim of more than maxUnion sources into
// claims of at most maxUnion each, in order; any other claim is one part.
func splitSources(p hookbox.ClaimParams) []hookbox.ClaimParams {
	if p.Strict || p.ByKey || len(p.Sources) <= maxUnion {
		return []hookbox.ClaimParams{p}
	}
	var parts []hookbox.ClaimParams
	for i := 0; i < len(p.Sources); i += maxUnion {
		part := p
		end := min(i+maxUnion, len(p.Sources))
		part.Sources = p.Sources[i:end]
		if p.Limits != nil {
			part.Limits = p.Limits[i:end]
		}
		parts = append(parts, part)
	}
	return parts
}

// claimSplit is the claim p in the parts claimParts leases one after
// the other: its sources split by splitSources; for a claim by key from
// AfterKey, the walk from there, then the wrap-around: the keys up to
// AfterKey, for what the first walk left of the limit.
func claimSplit(p hookbox.ClaimParams) []hookbox.ClaimParams {
	parts := splitSources(p)
	if p.ByKey && p.AfterKey != "" {
		wrap := p
		wrap.AfterKey = ""
		parts = append(parts, wrap)
	}
	return parts
}

// claimParts leases the events of a claim in parts (claimSplit), part
// after part in one transaction (leaseTx), each taking what the ones
// before it left of the limit: the events due first in each part, not
// across all (a claim over hundreds of sources with more due than its
// limit). It returns them in id order, and the ids of those whose
// payloads are left for readLarge.
//
// The first part's pick is built, and its time taken, before the
// transaction: which events are due is decided then, and one that comes
// due while the claim waits for the writer is the next claim's. The
// leases start, and the claim is dated, once the writer is ours: a claim
// that waited for it (behind a work transaction whose Go handlers run
// long, say) must not hand out leases already over, which the next claim
// would take again at once. The parts after the first, whose limits
// depend on what the first leased, pick at that later time.
func (s *Store) claimParts(ctx context.Context, parts []hookbox.ClaimParams) ([]hookbox.Event, []int64, error) {
	stmts := make([]*sql.Stmt, len(parts))
	queries := make([]string, len(parts))
	var firstArgs []any
	for i, part := range parts {
		q, args := claimSQL(part)
		st, err := s.claims.get(ctx, q)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", hookbox.ErrUnavailable, err)
		}
		stmts[i], queries[i] = st, q
		if i == 0 {
			firstArgs = args
		}
	}
	var out []hookbox.Event
	var large []int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := parts[0].Now
		if now.IsZero() {
			now = time.Now()
		}
		var used int64 // payload bytes the parts before took
		for i, part := range parts {
			part.Now, part.Limit = now, part.Limit-len(out)
			if part.Limit <= 0 || part.MaxPayloadBytes > 0 && used >= part.MaxPayloadBytes {
				break
			}
			args := firstArgs
			if i > 0 {
				_, args = claimSQL(part)
			}
			evs, big, n, err := s.leaseTx(ctx, tx, stmts[i], queries[i], args, leaseArgs(part), part.MaxPayloadBytes, used)
			if err != nil {
				return err
			}
			out, large, used = append(out, evs...), append(large, big...), used+n
		}
		if len(parts) > 1 {
			sortByID(out)
		}
		return nil
	})
	return out, large, err
}

// leaseIDs leases the events whose ids follow, up to a closing
// parenthesis, to an owner (argument 1) until a time (2), at a time (3),
// counting an attempt.
//
// OR FAIL, not SQLite's default ABORT: a statement that changes several
// rows and may stop part-way on a constraint (ABORT) first copies every
// page it changes into a statement journal, to undo itself alone. A row
// leased is written again whole, its payload with it, so that journal
// (in memory, temp_store) held a copy of every payload leased. No
// constraint can stop this statement (each column it sets gets a value
// that is not NULL, and a status the CHECK allows), and any other error
// (I/O, a full disk, an interrupt) fails the transaction, which the
// caller rolls back, as SQLite itself does on most of them: a lease
// statement is applied whole or not at all, journal or none.
const leaseIDs = `UPDATE OR FAIL events SET status = 'processing', attempts = attempts + 1,
            lease_owner = ?, next_attempt_at = ?, updated_at = ?
        WHERE id IN (`

// claimSQL builds the statement that picks the events of the claim p, and
// its arguments, leaving out those of paused queues (notPaused). It
// reads, for each event picked, its id, the length of its payload (NULL:
// cleared) and the payload itself when it is at most inTxPayload bytes:
// length() reads the size from the row's header, without the payload's
// pages.
func claimSQL(p hookbox.ClaimParams) (string, []any) {
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	pick, args, _, _ := claimPick(p)
	return `SELECT id, length(payload), CASE WHEN length(payload) <= ` + strconv.Itoa(inTxPayload) + ` THEN payload END
        FROM events WHERE id IN (` + pick + `)` + notPaused, args
}

// notPaused is the condition on a picked event (of the table events) that
// its queue is not paused (hookbox.Ops.PauseTarget). Claims and picks
// check pauses in their own statement, on the writer, whatever pauses the
// worker asking has read: one that could not read them (at start, while
// long reads hold every reader) still takes nothing of a paused queue.
// The walks over several sources give a paused one a limit of 0
// (unlessPaused), so that its events take none of the claim's limit or
// budget; this check on the events picked covers the claims of one
// source (strict, by key).
const notPaused = ` AND source NOT IN (SELECT name FROM paused_targets)`

// withinBudget returns how many of the payload sizes n (in id order; a
// cleared payload counts 0) a claim keeps within budget
// (hookbox.ClaimParams.MaxPayloadBytes), used bytes being taken already
// by the parts of the claim before: those before the first that would
// bring the total past it, and the first whatever its size when used is
// 0, so that a payload larger than the budget is still worked, alone. A
// budget of 0 keeps them all. The budget is applied here, to the sizes
// the pick read from the rows' headers, not in its SQL: a window sum
// over the pick cost the SQLite drain about a seventh of its rate.
func withinBudget(n []int64, budget, used int64) int {
	if budget <= 0 {
		return len(n)
	}
	for i, size := range n {
		if used+size > budget && (i > 0 || used > 0) {
			return i
		}
		used += size
	}
	return len(n)
}

// inTxPayload is the largest payload a claim reads in its write
// transaction; larger ones are read after the commit (readLarge).
const inTxPayload = 64 << 10

// leaseSQL leases the events whose ids are in a JSON array (argument 4),
// as leaseIDs does, and returns them as leasedColumns.
//
// A claim picks the ids first (claimSQL) and leases them by id: the one
// statement that leased the events of its pick (the pick a subquery of
// this UPDATE) held a copy of each row it changed, payload included, until
// it ended (34 MiB of SQLite memory at its peak for 16 payloads of 2 MiB,
// against 6 MiB leased by id: the row being written, one at a time).
var leaseSQL = leaseIDs + `SELECT value FROM json_each(?)) RETURNING ` + leasedColumns

// leasedColumns are a queued row's columns (scanQueuedEvent) without the
// payload: NULL in its place, and 0 for "cleared", which leaseTx and
// readLarge then set. A RETURNING clause that names the payload keeps a
// copy of every payload the statement changed until its last row is read.
var leasedColumns = strings.TrimSuffix(eventColumns, ", payload") + `, NULL, 0`

// leaseTx runs in tx the pick statement st (q, args: claimSQL) and leases
// what it picked (leaseSQL, lease: leaseArgs). It returns the events in
// id order, with their payloads of at most inTxPayload bytes, and the ids
// of those whose payloads are larger, left for readLarge (their Payload
// nil), and the total size of their payloads. The pick reads the
// payloads before the lease writes the rows: the transaction holds the
// write lock, nothing changes them in between.
func (s *Store) leaseTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args, lease []any, budget, used int64) ([]hookbox.Event, []int64, int64, error) {
	rows, err := query(ctx, tx, st, q, args...)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	type picked struct {
		n       sql.NullInt64
		payload []byte
	}
	pick := map[int64]picked{}
	var ids []int64
	for rows.Next() {
		var id int64
		var p picked
		if err := rows.Scan(&id, &p.n, (*driverBlob)(&p.payload)); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		pick[id], ids = p, append(ids, id)
	}
	if err := closeRows(rows); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	if budget > 0 {
		slices.Sort(ids)
		sizes := make([]int64, len(ids))
		for i, id := range ids {
			sizes[i] = pick[id].n.Int64
		}
		ids = ids[:withinBudget(sizes, budget, used)]
	}
	if len(ids) == 0 {
		return nil, nil, 0, nil
	}
	leased, err := tx.StmtContext(ctx, s.lease).QueryContext(ctx, append(lease, jsonArray(ids))...)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	evs, err := scanQueuedEvents(leased)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	var large []int64
	var size int64
	for i := range evs {
		e, p := &evs[i], pick[evs[i].ID]
		size += p.n.Int64
		switch {
		case !p.n.Valid:
			e.Payload, e.PayloadCleared = nil, true
		case p.n.Int64 > inTxPayload:
			e.Payload = nil // not an empty body: read after the commit
			large = append(large, e.ID)
		case p.payload == nil:
			e.Payload = []byte{} // the driver reads an empty blob as nil
		default:
			e.Payload = p.payload
		}
	}
	return evs, large, size, nil
}

// largeSQL reads the payloads of the events whose ids are in a JSON array,
// with their lengths (NULL: cleared).
const largeSQL = `SELECT id, length(payload), payload FROM events WHERE id IN (SELECT value FROM json_each(?))`

// readLarge sets the payloads of the events of evs whose ids are in
// large, reading them on a reader after the claim's commit: the events are
// leased to the claim, and a payload changes only once its event is done
// (ClearPayloads). It returns evs less those whose payload it could not
// read: a purged event, or all it had not read when a read failed, with
// the error. The claim is committed, so the read is not cut short when
// ctx ends (its events would be given back unread), but it is at by:
// halfway through the leases, so that a slow read never hands out an
// event whose lease is about to end, which another claimer could then
// take. It waits for a reader at most readerWait (claimReader), or until
// by if that is sooner.
func (s *Store) readLarge(ctx context.Context, evs []hookbox.Event, large []int64, by time.Time) ([]hookbox.Event, error) {
	at := make(map[int64]int, len(large))
	for i, e := range evs {
		if slices.Contains(large, e.ID) {
			at[e.ID] = i
		}
	}
	read := make(map[int64]bool, len(large))
	err := func() error {
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
		defer cancel()
		conn, err := s.claimReader(rctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		rows, err := conn.QueryContext(rctx, largeSQL, jsonArray(large))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var n sql.NullInt64
			var payload []byte
			if err := rows.Scan(&id, &n, (*driverBlob)(&payload)); err != nil {
				return err
			}
			i, ok := at[id]
			if !ok {
				continue
			}
			if !n.Valid {
				evs[i].Payload, evs[i].PayloadCleared = nil, true
			} else {
				evs[i].Payload = payload
			}
			read[id] = true
		}
		return rows.Err()
	}()
	if err != nil {
		err = fmt.Errorf("%w: payloads: %v", hookbox.ErrUnavailable, err)
	}
	if len(read) == len(at) {
		return evs, err
	}
	out := evs[:0]
	for _, e := range evs {
		if _, ok := at[e.ID]; !ok || read[e.ID] {
			out = append(out, e)
		}
	}
	return out, err
}

// claimReader takes a reader for a claim's reads after its commit
// (readLarge, keyCursor), waiting for one at most readerWait.
func (s *Store) claimReader(ctx context.Context) (*sql.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, readerWait)
	defer cancel()
	conn, err := s.reader.Conn(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, fmt.Errorf("no reader came free within %v (long reads hold every one): %w", readerWait, err)
	}
	return conn, err
}

// readerWait bounds how long a claim waits for a reader after its
// commit. The claim holds its pool's claiming loop, every queue's claims
// and not only its own, and long reads (console pages, exports, Stats on
// a big file) may hold every reader for minutes; a free one is had at
// once otherwise. A claim that cannot have one leaves its cursor where it
// was, and gives back the events whose payloads it could not read.
const readerWait = time.Second

// leaseArgs are leaseIDs' arguments for a claim made at p.Now.
func leaseArgs(p hookbox.ClaimParams) []any {
	return []any{p.Owner, millis(p.Now.Add(p.Lease)), millis(p.Now)}
}

// claimPick builds the query that picks the ids of the events p claims,
// its arguments, and the claim's time and lease end in milliseconds.
func claimPick(p hookbox.ClaimParams) (pick string, args []any, nowMS, until int64) {
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	nowMS, until = millis(now), millis(now.Add(p.Lease))
	if p.ByKey {
		pick, args = byKeyPick(p, nowMS)
		return pick, args, nowMS, until
	}
	if p.Strict {
		// Both reads stay inside events_due: finished rows, however many,
		// are never visited.
		pick = `SELECT id FROM events INDEXED BY events_due
            WHERE source = ? AND status IN ('pending', 'processing') AND next_attempt_at <= ?
              AND NOT EXISTS (SELECT 1 FROM events INDEXED BY events_due
                  WHERE source = ? AND status IN ('pending', 'processing') AND next_attempt_at > ?
                    AND status = 'processing')
            ORDER BY id LIMIT 1`
		args = []any{p.Sources[0], nowMS, p.Sources[0], nowMS}
	} else {
		// Per source, walk events_due in due order and stop at the limit;
		// then merge. Each source costs what it returns, however many
		// unfinished events other sources have. Events the claimer runs
		// are left out (a statement of its own, only when there are).
		skip := ""
		if len(p.RunningIDs) > 0 {
			skip = ` AND id NOT IN (SELECT value FROM json_each(?))`
		}
		// With a limit per source (ClaimParams.Limits), each part stops
		// at its own; the statement is the same. Such claims are padded
		// (paddedLimits), so that they come in a few texts.
		p.Sources, p.Limits = paddedLimits(p.Sources, p.Limits)
		parts := make([]string, len(p.Sources))
		for i, src := range p.Sources {
			parts[i] = `SELECT * FROM (SELECT id, next_attempt_at FROM events INDEXED BY events_due
                WHERE source = ? AND status IN ('pending', 'processing') AND next_attempt_at <= ?` + skip + `
                ORDER BY next_attempt_at, id LIMIT ` + unlessPaused + `)`
			args = append(args, src, nowMS)
			if skip != "" {
				args = append(args, jsonArray(p.RunningIDs))
			}
			args = append(args, src) // unlessPaused
			limit := p.Limit
			if p.Limits != nil {
				limit = min(max(p.Limits[i], 0), p.Limit)
			}
			args = append(args, limit)
		}
		pick = `SELECT id FROM (` + strings.Join(parts, " UNION ALL ") + `) ORDER BY next_attempt_at, id LIMIT ` + limitParam
		args = append(args, p.Limit)
	}
	return pick, args, nowMS, until
}

// paddedLimits pads the sources of a claim with a limit per source
// (limits not nil) to a power of two of them, at most maxUnion, with
// parts that take nothing (no source, a limit of 0), and returns them
// with their limits. The statement's text depends on how many sources it
// walks, and a round of claims covers however many queues its free slots
// reach: unpadded, those claims came in every count, and filled the
// cache of prepared claims (maxCached), past which a claim is parsed and
// planned every time it runs, as costly as running it. A part with a
// limit of 0 reads nothing.
func paddedLimits(sources []string, limits []int) ([]string, []int) {
	if limits == nil {
		return sources, limits
	}
	n := 1
	for n < len(sources) {
		n *= 2
	}
	n = max(min(n, maxUnion), len(sources))
	if n == len(sources) {
		return sources, limits
	}
	// New slices: the caller's are not written to.
	padS, padL := make([]string, n), make([]int, n)
	copy(padS, sources)
	copy(padL, limits)
	return padS, padL
}

// limitParam is a claim's LIMIT parameter. SQLite's planner reads the
// value bound to a bare `LIMIT ?` and, when the next execution binds
// another, prepares the statement again (as costly as running it); a claim
// asks for as many events as it has room for, which changes all the time.
// The cast hides the value from the planner.
const limitParam = `CAST(? AS INTEGER)`

// unlessPaused is a part's LIMIT, with two parameters: its source and
// limitParam's. It is 0 when the source is a paused queue
// (hookbox.Ops.PauseTarget), so that a paused queue's events take none
// of the claim's limit (nor of its payload budget), and its walk reads
// none of them: a LIMIT is evaluated once, before the walk, where a
// condition in the WHERE clause would be tested on every due event of
// the queue.
const unlessPaused = `CASE WHEN EXISTS (SELECT 1 FROM paused_targets WHERE name = ?) THEN 0 ELSE ` + limitParam + ` END`

// keyHeld is the condition on an event that holds its order key.
const keyHeld = `status IN ('pending', 'processing', 'dead')`

// keyWalk is the CTE k(key, n) of byKeyPick and walkEnd, with four
// arguments (keyWalkArgs): the distinct order keys of the source held by
// an event, in byte order, from the first after a key, numbered n from 0
// up to a last n.
const keyWalk = `k(key, n) AS (
            SELECT (SELECT order_key FROM events INDEXED BY events_order
                    WHERE source = ? AND order_key > ? AND order_key IS NOT NULL AND ` + keyHeld + `
                    ORDER BY order_key LIMIT 1), 0
            UNION ALL
            SELECT (SELECT order_key FROM events INDEXED BY events_order
                    WHERE source = ? AND order_key > k.key AND order_key IS NOT NULL AND ` + keyHeld + `
                    ORDER BY order_key LIMIT 1), k.n + 1
            FROM k WHERE k.key IS NOT NULL AND k.n < ?)`

// keyWalkArgs are keyWalk's arguments for a walk of the keys of p's
// source after after.
func keyWalkArgs(p hookbox.ClaimParams, after string) []any {
	return []any{p.Sources[0], after, p.Sources[0], p.KeyWalk() - 1}
}

// walkEnd finds where a claim by key's walk ended when it went all the
// way: the last key, and whether the walk was that long.
const walkEnd = `WITH RECURSIVE ` + keyWalk + `
        SELECT key, n = ? FROM k WHERE key IS NOT NULL ORDER BY n DESC LIMIT 1`

// keyCursor finds p.KeyCursor (hookbox.ClaimParams.FindKeyCursor) on a
// reader (claimReader), after the claim's commit.
func (s *Store) keyCursor(ctx context.Context, p hookbox.ClaimParams) error {
	conn, err := s.claimReader(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return p.FindKeyCursor(func(after string) (last string, full bool, err error) {
		err = conn.QueryRowContext(ctx, walkEnd, append(keyWalkArgs(p, after), p.KeyWalk()-1)...).Scan(&last, &full)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		return last, full, err
	})
}

// unkeyed reads up to a number of unfinished deliveries of a queue
// without an order key, with their delivery ids, first due first. It
// walks events_due: every unfinished delivery of the queue, which is why
// claims by key leave this to FillOrderKeys.
// Each round starts after the last row the one before read (the cursor
// ?3, ?4), so a pass reads the queue's index once rather than once per
// round past the rows it has already keyed.
const unkeyed = `SELECT id, delivery_id, next_attempt_at FROM events INDEXED BY events_due
        WHERE source = ?1 AND (next_attempt_at, id) > (?3, ?4)
          AND status IN ('pending', 'processing') AND order_key IS NULL
        ORDER BY next_attempt_at, id LIMIT ?2`

// fillBatch is how many deliveries one round of FillOrderKeys keys.
const fillBatch = 1000

// FillOrderKeys gives the unfinished deliveries of queue without an order
// key one each; see hookbox.Queue. It reads them on a reader and writes
// each round's keys in one short write transaction.
func (s *Store) FillOrderKeys(ctx context.Context, queue string, key func(deliveryID string) string) (int, error) {
	total := 0
	afterDue, afterID := int64(math.MinInt64), int64(0)
	for {
		rows, err := s.reader.QueryContext(ctx, unkeyed, queue, fillBatch, afterDue, afterID)
		if err != nil {
			return total, fmt.Errorf("sqlite: fill order keys: %w", err)
		}
		var ids []int64
		var keys []string
		for rows.Next() {
			var id int64
			var deliveryID string
			if err := rows.Scan(&id, &deliveryID, &afterDue); err != nil {
				rows.Close()
				return total, fmt.Errorf("sqlite: fill order keys: %w", err)
			}
			ids, keys, afterID = append(ids, id), append(keys, key(deliveryID)), id
		}
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("sqlite: fill order keys: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		n := 0
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			for i, id := range ids {
				res, err := tx.ExecContext(ctx, `UPDATE events SET order_key = ? WHERE id = ? AND order_key IS NULL`, keys[i], id)
				if err != nil {
					return err
				}
				m, _ := res.RowsAffected()
				n += int(m)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("sqlite: fill order keys: %w", err)
		}
		total += n
		// A round whose rows another writer keyed first still moves the
		// cursor on, so the pass ends.
		if len(ids) < fillBatch {
			return total, nil
		}
	}
}

// byKeyPick picks, for a claim by order key (hookbox.ClaimParams.ByKey),
// the first delivery of each order key of p.Sources[0] after p.AfterKey,
// in key order, that is due and not held by an earlier one: it walks the
// distinct keys through events_order (two index lookups per key, however
// many deliveries wait behind each) and stops at p.KeyWalk() keys.
// Keys in p.RunningKeys are passed without looking up their heads. A key
// with a delivery leased (events_leased_keys, one more lookup) is skipped
// whatever that delivery's id: a replay can put an earlier delivery back
// while a later one of its key runs. (Claims cannot see each other's heads differently
// here: each runs in the one writer's transaction, and ids follow commit
// order.)
func byKeyPick(p hookbox.ClaimParams, nowMS int64) (string, []any) {
	head := keyHeld
	if p.SkipDead {
		head += ` AND status <> 'dead'`
	}
	q := `WITH RECURSIVE ` + keyWalk + `
        SELECT e.id FROM k JOIN events e ON e.id = (
            SELECT id FROM events INDEXED BY events_order
            WHERE source = ? AND order_key = k.key AND order_key IS NOT NULL AND ` + head + `
            ORDER BY id LIMIT 1)
        WHERE k.key IS NOT NULL AND hex(k.key) NOT IN (SELECT value FROM json_each(?))
          AND e.status IN ('pending', 'processing') AND e.next_attempt_at <= ?
          AND NOT EXISTS (SELECT 1 FROM events INDEXED BY events_leased_keys
              WHERE source = ? AND order_key = k.key AND order_key IS NOT NULL
                AND status = 'processing' AND next_attempt_at > ?)
        LIMIT ` + limitParam
	src := p.Sources[0]
	// The keys go in hex, as SQLite's hex() reads the column: an order
	// key is whatever bytes a sender put in a header, and JSON would
	// replace those that are not UTF-8.
	running := make([]string, len(p.RunningKeys))
	for i, k := range p.RunningKeys {
		running[i] = fmt.Sprintf("%X", k)
	}
	return q, append(keyWalkArgs(p, p.AfterKey), src, jsonArray(running), nowMS, src, nowMS, p.Limit)
}

// jsonArray is vs as a JSON array, for json_each ("[]" when empty).
func jsonArray[T int64 | string](vs []T) string {
	if len(vs) == 0 {
		return "[]"
	}
	b, err := json.Marshal(vs)
	if err != nil {
		panic(err) // numbers and strings always marshal
	}
	return string(b)
}

// scanQueuedEvent reads one queued row: eventColumns and whether the
// payload was cleared (the driver reads an empty blob as nil too), the
// columns a read of events with their payloads uses (the marks of a dead
// pool read markedColumns, a claim's lease leasedColumns, a Go handlers'
// pick pickedColumns). That is asked of length(payload), which SQLite
// reads from the row's header: "payload IS NULL" would read the payload a
// second time.
func scanQueuedEvent(row interface{ Scan(...any) error }) (hookbox.Event, error) {
	e, err := scanListedEvent(row)
	if err == nil && !e.PayloadCleared && e.Payload == nil {
		e.Payload = []byte{}
	}
	return e, err
}

// pickedColumns are what a Go handlers' pick reads of each event (see
// workTx.Pick): eventColumns with the payload only when it is at most
// inTxPayload bytes, then the payload's length (NULL: cleared), read from
// the row's header.
var pickedColumns = strings.TrimSuffix(eventColumns, ", payload") +
	`, CASE WHEN length(payload) <= ` + strconv.Itoa(inTxPayload) + ` THEN payload END, length(payload)`

// pickTx runs a pick statement (see workTx.Pick), which selects
// pickedColumns, and returns the events in id order with the sizes of
// their payloads (0 for a cleared one). A payload larger than
// inTxPayload is left nil, not cleared, for the caller to read.
func pickTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args []any) ([]hookbox.Event, []int64, error) {
	rows, err := query(ctx, tx, st, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	defer rows.Close()
	type picked struct {
		e hookbox.Event
		n int64
	}
	var all []picked
	for rows.Next() {
		var n sql.NullInt64
		e, err := scanEvent(withLength{row: rows, n: &n})
		if err != nil {
			return nil, nil, err
		}
		switch {
		case !n.Valid:
			e.Payload, e.PayloadCleared = nil, true
		case n.Int64 > inTxPayload:
			e.Payload = nil // read by the caller
		case e.Payload == nil:
			e.Payload = []byte{} // the driver reads an empty blob as nil
		}
		all = append(all, picked{e, n.Int64})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(all, func(a, b picked) int { return cmp.Compare(a.e.ID, b.e.ID) })
	evs, sizes := make([]hookbox.Event, len(all)), make([]int64, len(all))
	for i, p := range all {
		evs[i], sizes[i] = p.e, p.n
	}
	return evs, sizes, nil
}

// withLength scans a row whose last column, after those its caller
// scans, is a payload's length.
type withLength struct {
	row interface{ Scan(...any) error }
	n   *sql.NullInt64
}

func (r withLength) Scan(dest ...any) error { return r.row.Scan(append(dest, r.n)...) }

// scanQueuedEvents reads queued rows (scanQueuedEvent), closes them and
// returns the events in id order.
func scanQueuedEvents(rows *sql.Rows) ([]hookbox.Event, error) {
	defer rows.Close()
	var out []hookbox.Event
	for rows.Next() {
		e, err := scanQueuedEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
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
	asked := time.Now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// As a claim's: the new end counts from the write, not from
		// before the wait for the writer.
		args[0] = millis(until.Add(time.Since(asked)))
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
		errs, err = s.finishTx(ctx, tx, outs, true)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: finish: %w", err)
	}
	return errs, nil
}

// finishTx applies each outcome guarded by owner and status, and records
// the attempts. The owner is unique per claim, so it also pins the attempt
// number the claim gave. Done outcomes of one owner are applied by one
// statement; retries and deaths, which carry their own times and errors,
// one by one.
//
// With claimed false the events were picked in this transaction and never
// leased in the database (see ClaimWork): the finish also counts the
// attempt, and needs no guard, the write lock having been held since.
//
// A released attempt (hookbox.Outcome.Released) moves attempt_base up with
// attempts, giving the attempt back to the retry budget. An event ended
// without running (hookbox.Outcome.NotRun) has the count its claim made
// taken back by the same UPDATE that marks it dead (for a picked one, the
// count is not made). Done outcomes, the common case, have statements of
// their own (finishDone), which neither of these changes.
//
// Every UPDATE here is OR FAIL, as leaseIDs is and for its reason: under
// ABORT, a statement over several rows copies each page it changes, a
// finished event's payload among them, into a statement journal. None can
// stop part-way on a constraint: the status is one the CHECK allows (the
// one-row statements run with the outcome's, and an error there changes
// nothing, the statement having one row), the times are never NULL. Any
// other error fails the call, and its transaction is rolled back whole
// (Finish, and the callers of hookbox.WorkTx, which must Rollback after
// an error).
func (s *Store) finishTx(ctx context.Context, tx *sql.Tx, outs []hookbox.Outcome, claimed bool) ([]error, error) {
	errs := make([]error, len(outs))
	applied := make([]bool, len(outs))
	doneByOwner := map[string][]int{}
	var upd *sql.Stmt
	for i, o := range outs {
		switch o.Status {
		case "":
			continue // not run (see hookbox.Queue.Work): nothing to apply
		case hookbox.StatusDone:
			doneByOwner[o.Owner] = append(doneByOwner[o.Owner], i)
			continue
		}
		if upd == nil {
			// ?8 is 1 for a released attempt, else 0; ?9 is 1 for an
			// event ended without running, else 0.
			q := `UPDATE OR FAIL events
                SET status = ?1, attempts = attempts - ?9, attempt_base = attempt_base + ?8, lease_owner = NULL,
                    next_attempt_at = ?2, last_error = ?3, updated_at = ?4
                WHERE id = ?5 AND lease_owner = ?6 AND attempts = ?7 AND status = 'processing'`
			if !claimed {
				// Same arguments; the owner and attempt (?6, ?7) guard
				// nothing here, the write lock having been held since
				// the pick.
				q = `UPDATE OR FAIL events
                SET status = ?1, attempts = attempts + 1 - ?9, attempt_base = attempt_base + ?8, lease_owner = NULL,
                    next_attempt_at = ?2, last_error = ?3, updated_at = ?4
                WHERE id = ?5 AND ?6 IS NOT NULL AND ?7 IS NOT NULL`
			}
			var err error
			upd, err = tx.PrepareContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer upd.Close()
		}
		next := o.NextAttemptAt()
		given := 0
		if o.AttemptOutcome() == hookbox.AttemptReleased {
			given = 1
		}
		takenBack := o.Attempt - o.AttemptsAfter()
		res, err := upd.ExecContext(ctx, string(o.Status), millis(next), nullString(o.Error), millis(o.FinishedAt),
			o.ID, o.Owner, o.Attempt, given, takenBack)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		applied[i] = n == 1
	}
	for owner, idx := range doneByOwner {
		if err := s.finishDone(ctx, tx, owner, claimed, outs, idx, applied); err != nil {
			return nil, err
		}
	}
	for i, o := range outs {
		if o.Status != "" && !applied[i] {
			errs[i] = hookbox.ErrLeaseLost
		}
	}
	if err := s.recordAttempts(ctx, tx, outs, applied); err != nil {
		return nil, err
	}
	return errs, nil
}

// finishDoneSQL marks n events done if their claim's owner still holds
// them, and reports which it marked.
func finishDoneSQL(n int) string {
	return `UPDATE OR FAIL events
            SET status = 'done', lease_owner = NULL, next_attempt_at = ?1, last_error = NULL, updated_at = ?1
            WHERE lease_owner = ?2 AND status = 'processing' AND id IN (` + placeholders(n) + `)
            RETURNING id`
}

// finishPickedSQL marks n events done that were picked, not leased, in
// the same transaction (see ClaimWork), counting the attempt. It takes
// finishDoneSQL's arguments; the owner (?2) guards nothing here.
func finishPickedSQL(n int) string {
	return `UPDATE OR FAIL events
            SET status = 'done', attempts = attempts + 1, lease_owner = NULL, next_attempt_at = ?1,
                last_error = NULL, updated_at = ?1
            WHERE ?2 IS NOT NULL AND id IN (` + placeholders(n) + `)
            RETURNING id`
}

// finishDone marks the events outs[idx] done if owner still holds them.
func (s *Store) finishDone(ctx context.Context, tx *sql.Tx, owner string, claimed bool, outs []hookbox.Outcome, idx []int, applied []bool) error {
	set := s.finishes
	if !claimed {
		set = s.picked
	}
	args := make([]any, 0, 2+chunkSizes[0])
	for len(idx) > 0 {
		n, st := set.next(ctx, tx, len(idx))
		chunk := idx[:n]
		idx = idx[n:]
		var at int64
		args = append(args[:0], nil, owner)
		for _, i := range chunk {
			at = max(at, millis(outs[i].FinishedAt))
			args = append(args, outs[i].ID)
		}
		args[0] = at
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		done := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			done[id] = true
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		for _, i := range chunk {
			applied[i] = done[outs[i].ID]
		}
	}
	return nil
}

// insertAttemptsSQL inserts n attempts rows.
func insertAttemptsSQL(n int) string {
	return `INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at) VALUES ` + rowsOf(n, 7)
}

// recordAttempts inserts one attempts row per outcome that ran and is
// stored (hookbox.AttemptStored), many rows per statement.
func (s *Store) recordAttempts(ctx context.Context, tx *sql.Tx, outs []hookbox.Outcome, applied []bool) error {
	var rows []any
	for i, o := range outs {
		if o.Status == "" {
			continue
		}
		outcome, number := o.AttemptOutcome(), o.AttemptsAfter()
		if !applied[i] {
			// The claim's count stands: the row is the claimed attempt's.
			outcome, number = hookbox.AttemptLost, o.Attempt
		}
		if !hookbox.AttemptStored(number, outcome) {
			continue
		}
		rows = append(rows, o.ID, number, o.Owner, outcome, nullString(o.Error),
			millis(o.StartedAt), millis(o.FinishedAt))
	}
	for len(rows) > 0 {
		n, st := s.attempts.next(ctx, tx, len(rows)/7)
		chunk := rows[:7*n]
		rows = rows[7*n:]
		_, err := st.ExecContext(ctx, chunk...)
		if isForeignKey(err) {
			// An event was purged meanwhile: record the others one by one.
			_, one := s.attempts.next(ctx, tx, 1)
			err = nil
			for j := 0; j < len(chunk); j += 7 {
				if _, e := one.ExecContext(ctx, chunk[j:j+7]...); e != nil && !isForeignKey(e) {
					err = e
					break
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// Attempts lists the attempts at one event, oldest first; see
// hookbox.Queue.
func (s *Store) Attempts(ctx context.Context, eventID int64) ([]hookbox.Attempt, error) {
	rows, err := s.reader.QueryContext(ctx, attemptsSQL, eventID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: attempts: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Attempt
	var count int
	var status hookbox.Status
	for rows.Next() {
		var a hookbox.Attempt
		var k int
		var msg sql.NullString
		var started, finished int64
		if err := rows.Scan(&k, &a.Attempt, &a.Owner, &a.Outcome, &msg, &started, &finished); err != nil {
			return nil, fmt.Errorf("sqlite: attempts: %w", err)
		}
		if k < 0 { // the event's own row: its count and status
			count, status = a.Attempt, hookbox.Status(a.Outcome)
			continue
		}
		a.Error, a.StartedAt, a.FinishedAt = msg.String, fromMillis(started), fromMillis(finished)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: attempts: %w", err)
	}
	return hookbox.WithUnknown(out, count, status), nil
}

// attemptsSQL lists an event's (?1) attempts, each with its kind (k):
// first the event's row itself (k -1: its attempt count as attempt, its
// status as outcome, for hookbox.WithUnknown), then its first attempt
// when it succeeded on it, which has no row (hookbox.AttemptStored) and
// is read from the event, then its rows in the order they were written.
// One statement, so all of it is read from one snapshot.
const attemptsSQL = `SELECT k, attempt, owner, outcome, error, started_at, finished_at FROM (
    SELECT -1 AS k, 0 AS id, attempts AS attempt, '' AS owner, status AS outcome, NULL AS error,
        0 AS started_at, 0 AS finished_at
    FROM events WHERE id = ?1
    UNION ALL
    SELECT 0, 0, 1, '', '` + hookbox.AttemptDone + `', NULL, updated_at, updated_at
    FROM events WHERE id = ?1 AND ` + impliedFirstAttempt + `
    UNION ALL
    SELECT 1, id, attempt, owner, outcome, error, started_at, finished_at FROM attempts WHERE event_id = ?1)
ORDER BY k, id`

// impliedFirstAttempt holds for an event row whose first attempt
// succeeded and has no attempts row (hookbox.AttemptStored): one done
// after that one attempt. Attempt numbers go on across replays, and a
// replay writes this row down first, so only attempt 1 is ever implied.
// An event done after more attempts whose first left no row is not
// matched: that attempt died with its process, and is listed as unknown
// (hookbox.WithUnknown), never as done. Rows stored before that rule
// have one, and are not matched.
const impliedFirstAttempt = `status = 'done' AND attempts = 1
    AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.event_id = events.id AND a.attempt = 1)`

var _ hookbox.Transactor = (*Store)(nil)

// InTx runs fn in a write transaction; see hookbox.Transactor.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *hookbox.Tx) error) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		htx := hookbox.NewTx(tx, hookbox.DialectSQLite, nil)
		if err := fn(ctx, htx); err != nil {
			return err
		}
		// A statement that ended the transaction, its error swallowed by
		// fn: what is left to commit is not what fn wrote.
		return htx.Lost()
	})
}

// WorkerStarted records a running pool; see hookbox.Queue.
func (s *Store) WorkerStarted(ctx context.Context, w hookbox.Worker) ([]hookbox.Worker, error) {
	var others []hookbox.Worker
	now := millis(time.Now())
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		others = nil
		rows, err := tx.QueryContext(ctx, `SELECT name, host, pid FROM workers WHERE name <> ?`, w.Name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o hookbox.Worker
			if err := rows.Scan(&o.Name, &o.Host, &o.PID); err != nil {
				return err
			}
			others = append(others, o)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO workers (name, started_at, seen_at, host, pid) VALUES (?1, ?2, ?2, ?3, ?4)
            ON CONFLICT (name) DO UPDATE SET seen_at = ?2`, w.Name, now, w.Host, w.PID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: worker started: %w", err)
	}
	return others, nil
}

// WorkerSeen refreshes a pool's record and drops stale ones; see
// hookbox.Queue.
func (s *Store) WorkerSeen(ctx context.Context, name string, staleAfter time.Duration) (int, error) {
	var dead int64
	now := time.Now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO workers (name, started_at, seen_at) VALUES (?1, ?2, ?2)
            ON CONFLICT (name) DO UPDATE SET seen_at = ?2`, name, millis(now)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM workers WHERE name <> ? AND seen_at < ?`, name, millis(now.Add(-staleAfter)))
		if err != nil {
			return err
		}
		dead, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: worker seen: %w", err)
	}
	return int(dead), nil
}

// WorkerStopped deletes a pool's record; see hookbox.Queue.
func (s *Store) WorkerStopped(ctx context.Context, name string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM workers WHERE name = ?`, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: worker stopped: %w", err)
	}
	return nil
}
