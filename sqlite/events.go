package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

// insertSQL is a multi-row INSERT of n events that reports the rows it
// inserted; rows that hit a unique constraint, (source, delivery_id) or
// (source, body_sha256), are left out.
func insertSQL(n int) string {
	return `INSERT INTO events
    (source, delivery_id, id_is_hash, event_type, headers, payload, next_attempt_at, created_at, updated_at, body_sha256,
     status, fanout)
VALUES ` + rowsOf(n, 12) + ` ON CONFLICT DO NOTHING RETURNING id, source, delivery_id`
}

// insertDeliveriesSQL inserts n deliveries of FanOut events (see
// hookbox.Route): rows that copy their event and point at it.
func insertDeliveriesSQL(n int) string {
	return `INSERT INTO events
    (source, delivery_id, id_is_hash, event_type, headers, payload, next_attempt_at, created_at, updated_at,
     parent_id, order_key)
VALUES ` + rowsOf(n, 11)
}

// The stored row a skipped delivery conflicted with: by its id, else by
// its body.
const (
	selectEventID     = `SELECT id FROM events WHERE source = ? AND delivery_id = ?`
	selectEventByBody = `SELECT id FROM events WHERE source = ? AND body_sha256 = ?`
)

type eventKey struct{ source, id string }

// Ingest stores ds in one transaction and returns once it is durable; see
// hookbox.Store. Deliveries that cannot be stored (see Add) are left out:
// the others are committed, and the error is a *hookbox.BadDeliveries.
func (s *Store) Ingest(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	return hookbox.IngestInOne(ctx, s, ds)
}

// BeginIngest opens a write transaction (BEGIN IMMEDIATE) for deliveries
// added in batches; see hookbox.IngestBeginner. It holds the only writer
// connection until Commit or Rollback.
func (s *Store) BeginIngest(ctx context.Context) (hookbox.IngestTx, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.explain(fmt.Errorf("sqlite: ingest: %w: begin: %w", hookbox.ErrUnavailable, err))
	}
	return &ingestTx{s: s, tx: tx}, nil
}

// ingestTx is an open ingest transaction on the writer connection.
type ingestTx struct {
	s    *Store
	tx   *sql.Tx
	args []any
	// stored is set once the transaction has stored an event.
	stored bool
}

// Add inserts ds in the open transaction; see hookbox.IngestTx. A
// delivery hookbox.CheckStorable refuses (the rule both stores apply
// before any SQL: a name, id, event type or order key too long or not
// UTF-8 text without NUL bytes, a NUL byte in a header, …) is left out
// and the others are added: the error is then a *hookbox.BadDeliveries, and the
// transaction stays usable.
func (t *ingestTx) Add(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	var bad map[int]error
	for i := range ds {
		if err := hookbox.CheckStorable(&ds[i]); err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = err
		}
	}
	rs, err := t.add(ctx, ds, bad)
	if err != nil {
		return nil, t.s.explain(fmt.Errorf("sqlite: ingest: %w", err))
	}
	if bad != nil {
		return rs, &hookbox.BadDeliveries{Bad: bad}
	}
	return rs, nil
}

// add stores the deliveries of ds not in bad, in rounds (see
// hookbox.InsertInOrder), and returns their receipts.
func (t *ingestTx) add(ctx context.Context, ds []hookbox.Delivery, bad map[int]error) ([]hookbox.Receipt, error) {
	rs := make([]hookbox.Receipt, len(ds))
	err := hookbox.InsertInOrder(ds, rs, func(i int) bool { return bad[i] != nil }, func(idx []int) error {
		return t.insertEvents(ctx, ds, idx, rs)
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// insertEvents stores the entries idx of ds, no two of which share a key,
// and fills their receipts: the new row, else the stored row with the
// entry's delivery id, else the one with its body.
func (t *ingestTx) insertEvents(ctx context.Context, ds []hookbox.Delivery, idx []int, rs []hookbox.Receipt) error {
	inserted := make(map[eventKey]int64, len(idx))
	for rest := idx; len(rest) > 0; {
		n, insert := t.s.inserts.next(ctx, t.tx, len(rest))
		args := t.args[:0]
		for _, i := range rest[:n] {
			d := &ds[i]
			hdr := encodeHeader(d.Header)
			at := millis(d.ReceivedAt)
			var sum any // NULL unless the source dedupes by body
			if d.BodySHA256 != nil {
				sum = d.BodySHA256
			}
			status := hookbox.StatusPending
			if d.FanOut {
				status = hookbox.StatusDone // never worked itself: see hookbox.Delivery
			}
			args = append(args, d.Source, d.DeliveryID, d.IDIsHash, d.EventType, hdr, payloadArg(d.Payload), at, at, at, sum,
				status, d.FanOut)
		}
		t.args = args
		rows, err := insert.QueryContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("%w: insert events: %w", hookbox.ErrUnavailable, err)
		}
		for rows.Next() {
			var k eventKey
			var id int64
			if err := rows.Scan(&id, &k.source, &k.id); err != nil {
				rows.Close()
				return fmt.Errorf("%w: insert events: %w", hookbox.ErrUnavailable, err)
			}
			inserted[k] = id
		}
		if err := closeRows(rows); err != nil {
			return fmt.Errorf("%w: insert events: %w", hookbox.ErrUnavailable, err)
		}
		rest = rest[n:]
	}
	t.stored = t.stored || len(inserted) > 0
	clear(t.args) // drop references to payloads
	if err := t.addDeliveries(ctx, ds, idx, inserted); err != nil {
		return err
	}
	for _, i := range idx {
		d := &ds[i]
		if id, ok := inserted[eventKey{d.Source, d.DeliveryID}]; ok {
			rs[i] = hookbox.Receipt{ID: id}
			continue
		}
		var id int64
		err := t.tx.QueryRowContext(ctx, selectEventID, d.Source, d.DeliveryID).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) && d.BodySHA256 != nil {
			err = t.tx.QueryRowContext(ctx, selectEventByBody, d.Source, d.BodySHA256).Scan(&id)
		}
		if err != nil {
			return fmt.Errorf("%w: find duplicate: %v", hookbox.ErrUnavailable, err)
		}
		rs[i] = hookbox.Receipt{ID: id, Duplicate: true}
	}
	return nil
}

// addDeliveries inserts the deliveries (hookbox.Route) of the FanOut
// events among the entries idx of ds that were stored new, in the order
// of idx, so that the deliveries of one target follow their events' ids.
func (t *ingestTx) addDeliveries(ctx context.Context, ds []hookbox.Delivery, idx []int, inserted map[eventKey]int64) error {
	var args []any
	for _, i := range idx {
		d := &ds[i]
		id, ok := inserted[eventKey{d.Source, d.DeliveryID}]
		if !ok || !d.FanOut {
			continue
		}
		hdr := encodeHeader(d.Header)
		at := millis(d.ReceivedAt)
		for _, r := range d.Routes {
			args = append(args, hookbox.QueueName(d.Source, r.Target), d.DeliveryID, d.IDIsHash, d.EventType, hdr,
				payloadArg(d.Payload), at, at, at, id, nullString(r.OrderKey))
		}
	}
	for len(args) > 0 {
		n := min(len(args)/11, maxRowsPerInsert)
		if _, err := t.tx.ExecContext(ctx, insertDeliveriesSQL(n), args[:11*n]...); err != nil {
			return fmt.Errorf("%w: insert deliveries: %v", hookbox.ErrUnavailable, err)
		}
		args = args[11*n:]
	}
	return nil
}

// maxRowsPerInsert keeps a multi-row INSERT of deliveries under SQLite's
// limit of 32,766 bound parameters.
const maxRowsPerInsert = 256

// payloadArg binds a payload: the driver binds a nil slice as NULL, which
// means "cleared by payload retention", so an empty body is bound as a
// zero-length blob instead.
func payloadArg(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// Commit commits and, before the receipts count, checks that the commit
// went into the file the database path names and, under the FULL promise,
// waits until it is on disk (see Store.settle); the writer connection is
// free for the next transaction while the disk flushes.
//
// The first transaction that stored an event above a placeholder of
// RaiseIDFloor deletes it first: the event holds the floor from then on.
// That costs every other transaction one atomic load. A failure to
// delete it fails no delivery; the next transaction tries again.
func (t *ingestTx) Commit(ctx context.Context) error {
	dropped := false
	if t.stored && t.s.idFloor.Load() {
		_, err := t.tx.ExecContext(ctx, dropIDFloorSQL, hookbox.IDFloorSource)
		dropped = err == nil
	}
	if err := t.tx.Commit(); err != nil {
		return t.s.explain(fmt.Errorf("sqlite: ingest: %w: commit: %w", hookbox.ErrUnavailable, err))
	}
	if dropped {
		t.s.idFloor.Store(false)
	}
	if err := t.s.settle(); err != nil {
		return fmt.Errorf("sqlite: ingest: %w", err)
	}
	return nil
}

// Rollback abandons the transaction.
func (t *ingestTx) Rollback() error { return t.tx.Rollback() }

const eventColumns = `id, source, delivery_id, id_is_hash, event_type, status, attempts, attempt_base,
    next_attempt_at, lease_owner, last_error, created_at, updated_at, parent_id, fanout, order_key, headers, payload`

// statusSummary is the status column as an operator reads it: a FanOut
// event's summarises its deliveries (see hookbox.SummaryStatus).
const statusSummary = `CASE WHEN fanout THEN coalesce((SELECT CASE
        WHEN count(*) = 0 THEN 'stored'
        WHEN max(c.status = 'processing') THEN 'processing'
        WHEN max(c.status = 'pending') THEN 'pending'
        WHEN max(c.status = 'dead') THEN 'dead' ELSE 'done' END
    FROM events c WHERE c.parent_id = events.id), 'stored') ELSE status END`

// listedColumns are eventColumns with the status an operator reads.
var listedColumns = strings.Replace(eventColumns, "status,", statusSummary+",", 1)

// driverBlob is a []byte that a scan takes from the driver as it is,
// without database/sql's copy: scanned into a *[]byte, a payload was
// allocated twice, once by the driver and once by the copy (16 MiB to
// read 8 MiB). database/sql copies because a driver may reuse the
// memory it hands over; modernc.org/sqlite does not (columnBlob makes a
// new slice for each value it reads), so the slice is the caller's.
// TestEventPayloadReadOnce fails if a driver version starts reusing it
// (the payloads read back would change) or copying twice again.
type driverBlob []byte

// Scan keeps src's bytes without copying them; NULL is nil.
func (b *driverBlob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*b = nil
	case []byte:
		*b = v
	case string:
		*b = []byte(v)
	default:
		return fmt.Errorf("sqlite: scan %T as bytes", src)
	}
	return nil
}

// scanEvent reads one row selected with eventColumns.
func scanEvent(row interface{ Scan(...any) error }) (hookbox.Event, error) {
	var (
		e                  hookbox.Event
		next, created, upd int64
		owner, lastErr     sql.NullString
		parent             sql.NullInt64
		orderKey           sql.NullString
		hdr                []byte
	)
	err := row.Scan(&e.ID, &e.Source, &e.DeliveryID, &e.IDIsHash, &e.EventType, &e.Status,
		&e.Attempts, &e.AttemptBase, &next, &owner, &lastErr, &created, &upd, &parent, &e.FanOut, &orderKey,
		&hdr, (*driverBlob)(&e.Payload))
	if err != nil {
		return e, err
	}
	e.Parent, e.OrderKey = parent.Int64, orderKey.String
	if e.Parent != 0 {
		_, e.Target = hookbox.SplitQueueName(e.Source)
	}
	e.NextAttemptAt, e.CreatedAt, e.UpdatedAt = fromMillis(next), fromMillis(created), fromMillis(upd)
	e.LeaseOwner, e.LastError = owner.String, lastErr.String
	e.Header, err = rowscan.Header(e.ID, hdr)
	return e, err
}

// scanListedEvent reads one row selected with eventColumns followed by
// length(payload) IS NULL (see scanQueuedEvent).
func scanListedEvent(row interface{ Scan(...any) error }) (hookbox.Event, error) {
	var cleared bool
	e, err := scanEvent(rowscan.WithCleared{Row: row, Cleared: &cleared})
	e.PayloadCleared = cleared
	return e, err
}

// Event returns one event with headers and payload. An empty payload is
// zero bytes, never nil; a cleared one is nil, with PayloadCleared set.
func (s *Store) Event(ctx context.Context, id int64) (hookbox.Event, error) {
	e, err := scanListedEvent(s.reader.QueryRowContext(ctx, `SELECT `+listedColumns+`, length(payload) IS NULL FROM events WHERE id = ?`, id))
	if err == nil && !e.PayloadCleared && e.Payload == nil {
		e.Payload = []byte{} // the driver reads a zero-length blob as nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("event %d: %w", id, hookbox.ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("sqlite: event %d: %w", id, err)
	}
	return e, nil
}

// Events lists events matching f, newest first, without payloads. A
// listing by source (bySource) first reads how many rows the source has
// (sourceScope), in the same read transaction as the listing, and reads
// them as listBySource says.
func (s *Store) Events(ctx context.Context, f hookbox.Filter) ([]hookbox.Event, error) {
	if !bySource(f) {
		q, args := eventsQuery(f)
		out, err := listEvents(ctx, s.reader, q, args)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		return out, nil
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	defer tx.Rollback()
	out, err := listBySource(ctx, tx, f)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return out, nil
}

// listEvents runs q, a statement that selects listedColumns and whether
// the payload is cleared, and reads its events.
func listEvents(ctx context.Context, db queryer, q string, args []any) ([]hookbox.Event, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hookbox.Event
	for rows.Next() {
		e, err := scanListedEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// bySource reports whether Events lists f by its source's rows: with a
// source and no narrower way in (a delivery id or a parent, each an
// index lookup; a status whose rows statusCandidates finds through a
// partial index).
func bySource(f hookbox.Filter) bool {
	if cond, _ := statusCandidates(f); cond != "" {
		return false
	}
	return f.Source != "" && f.DeliveryID == "" && f.Parent == 0
}

// uniqueIndex is the index SQLite made for the events table's UNIQUE
// (source, delivery_id): every row, by source. TestSourceListingReadsItsOwnRows
// fails if a migration ever renames it.
const uniqueIndex = "sqlite_autoindex_events_1"

// sourceFewRows is the number of rows (events and their targets'
// deliveries) below which a source's listing reads all of them through
// uniqueIndex and sorts their ids, rather than walk down the ids (see
// listBySource): PostgreSQL's listing takes the same threshold.
const sourceFewRows = 10000

// sourceWalkIDs is how far down the ids, from the page's start, the
// listing of a source with many rows walks before it reads the rest of
// the page through uniqueIndex (see listBySource): about 15 ms at three
// million events of 1 KiB, where reading a source's ids from the index
// costs far less a row than walking the table's.
const sourceWalkIDs = 20000

// sourceScopeSQL reads, for the source ?1 (its events and its targets'
// deliveries, between ?2 and ?3 as filterSQL matches them), the number
// of its rows up to ?4, counted in uniqueIndex (one seek per range, no
// table row), and the highest id of any row.
const sourceScopeSQL = `SELECT (SELECT count(*) FROM (SELECT 1 FROM events INDEXED BY ` + uniqueIndex + `
        WHERE source = ?1 OR (source > ?2 AND source < ?3) LIMIT ?4)),
    (SELECT coalesce(max(id), 0) FROM events)`

// sourceScope is what listBySource learns of a source before listing
// it: how many rows it has, up to sourceFewRows, and the highest id of
// any row.
type sourceScope struct {
	rows int
	top  int64
}

// readSourceScope reads the scope of source.
func readSourceScope(ctx context.Context, db queryer, source string) (sourceScope, error) {
	var sc sourceScope
	rows, err := db.QueryContext(ctx, sourceScopeSQL, source, source+"/", source+"0", sourceFewRows)
	if err != nil {
		return sc, err
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&sc.rows, &sc.top); err != nil {
			return sc, err
		}
	}
	return sc, rows.Err()
}

// listBySource lists f, which bySource holds for, by its source's rows.
// Left to itself, the planner read every row of the source through
// uniqueIndex and sorted them (a second a page for a source of 600,000
// events at three million), and a source with no row could walk every
// id. Now a source without rows answers at once, with no listing; one
// with fewer than sourceFewRows has them all read from uniqueIndex and
// their ids sorted (sourceFromIndex); one with more is walked down the
// ids from the page's start, which finds a page of a busy source in a
// few hundred rows (sourceWalk), for at most sourceWalkIDs ids: the
// rest of the page, if the walk did not fill it (a source quiet of
// late, a filter few of its rows match), is read from uniqueIndex below
// the walk, so a listing never costs much more than reading the source's
// rows.
func listBySource(ctx context.Context, db queryer, f hookbox.Filter) ([]hookbox.Event, error) {
	sc, err := readSourceScope(ctx, db, f.Source)
	if err != nil || sc.rows == 0 {
		return nil, err
	}
	if sc.rows < sourceFewRows {
		q, args := eventsQueryBy(f, sourceFromIndex, 0)
		return listEvents(ctx, db, q, args)
	}
	start := f.BeforeID
	if start <= 0 || start > sc.top {
		start = sc.top + 1
	}
	floor := start - sourceWalkIDs
	q, args := eventsQueryBy(f, sourceWalk, floor)
	out, err := listEvents(ctx, db, q, args)
	limit := listLimit(f)
	if err != nil || len(out) == limit || floor <= 0 {
		return out, err
	}
	rest := f
	rest.BeforeID, rest.Limit = floor, limit-len(out)
	q, args = eventsQueryBy(rest, sourceFromIndex, 0)
	more, err := listEvents(ctx, db, q, args)
	return append(out, more...), err
}

// sourceRead is how a listing reads the rows of its filter's source.
type sourceRead int

const (
	// sourcePlanned leaves the way to the planner.
	sourcePlanned sourceRead = iota
	// sourceFromIndex reads the ids of all the source's matching rows
	// through uniqueIndex, sorts them, and reads the page's rows by id.
	sourceFromIndex
	// sourceWalk walks down the ids (NOT INDEXED) from the page's start
	// to an id floor, checking each row.
	sourceWalk
)

// listLimit is the number of events a listing of f returns at most.
func listLimit(f hookbox.Filter) int {
	if f.Limit <= 0 {
		return hookbox.DefaultListLimit
	}
	return f.Limit
}

// eventsQuery is the statement Events runs for f, and its arguments,
// when it does not list f by source (bySource).
func eventsQuery(f hookbox.Filter) (string, []any) { return eventsQueryBy(f, sourcePlanned, 0) }

// eventsQueryBy is the statement that lists f, reading its source's rows
// as read says, and its arguments; floor is sourceWalk's lowest id.
func eventsQueryBy(f hookbox.Filter, read sourceRead, floor int64) (string, []any) {
	where, args := filterSQL(f)
	if cond, cargs := statusCandidates(f); cond != "" {
		// The rows that can read so, found through the partial index of
		// their status: a walk down the ids checking each event's status
		// read every done event below the page's last, and with a source
		// the (source, delivery_id) index gave every event of the source,
		// sorted (seconds, for a page of one source's dead events at
		// three million). Not for Replay (replayWhere), whose slices walk
		// up the ids from the last one's.
		if where == "" {
			where = " WHERE " + cond
		} else {
			where += " AND " + cond
		}
		args = append(args, cargs...)
	}
	limit := listLimit(f)
	columns := strings.Replace(listedColumns, "headers, payload", "headers, NULL", 1) + `, length(payload) IS NULL`
	switch read {
	case sourceFromIndex:
		// The page's ids, then its rows by id: sorting whole rows would
		// read each one's columns (and a FanOut event's summary) first.
		return `SELECT ` + columns + ` FROM events WHERE id IN (SELECT id FROM events INDEXED BY ` + uniqueIndex +
			where + ` ORDER BY id DESC LIMIT ?) ORDER BY id DESC LIMIT ?`, append(args, limit, limit)
	case sourceWalk:
		return `SELECT ` + columns + ` FROM events NOT INDEXED` + where + ` AND id >= ? ORDER BY id DESC LIMIT ?`,
			append(args, floor, limit)
	}
	return `SELECT ` + columns + ` FROM events` + where + ` ORDER BY id DESC LIMIT ?`, append(args, limit)
}

// statusRows are the rows of each status an event leaves, as conditions
// that name the partial index holding them (events_due, events_dead):
// written out, so that the planner sees the index's own condition.
var statusRows = map[hookbox.Status]string{
	hookbox.StatusPending:    `events INDEXED BY events_due WHERE status IN ('pending', 'processing') AND status = 'pending'`,
	hookbox.StatusProcessing: `events INDEXED BY events_due WHERE status IN ('pending', 'processing') AND status = 'processing'`,
	hookbox.StatusDead:       `events INDEXED BY events_dead WHERE status = 'dead'`,
}

// statusCandidates is a condition (and its args) that holds for the
// events that may have f.Status as statusSummary reads it, when that is
// pending, processing or dead: the rows in it (of f.Source, if set), and
// the FanOut events with a delivery in it, below f.BeforeID. What it
// reads is as long as the rows in that status, which the partial index
// of the status holds; each delivery's parent is read from its row, by
// id. A parent below the page's bound may have its deliveries above it:
// the bound is on the parent. For stored (a FanOut event without
// deliveries), the FanOut events (events_fanout). Empty for any other
// status: done is most of the table, and a walk down the ids finds a page
// of it soonest.
//
// When f filters on nothing else, the page is the newest of the rows in
// the status and of the parents, so the rows are those of the page's
// length from the top of the index (no table row read), and the parents
// are read only from the deliveries above the lowest of those: a parent
// on the page is at or above the page's lowest id, which is at or above
// theirs, and its deliveries are above it. A page of a large backlog of
// pending events then reads the page's rows, not the backlog's.
func statusCandidates(f hookbox.Filter) (string, []any) {
	if f.Status == hookbox.StatusStored {
		return "fanout", nil
	}
	rows, ok := statusRows[f.Status]
	if !ok {
		return "", nil
	}
	var srcArgs []any
	src := ""
	if f.Source != "" {
		// The source's rows, and its targets' deliveries, whose parents
		// are the source's.
		src = " AND (source = ? OR (source > ? AND source < ?))"
		srcArgs = []any{f.Source, f.Source + "/", f.Source + "0"}
	}
	own := `SELECT id FROM ` + rows + src + ` AND (? = 0 OR id < ?)`
	ownArgs := append(srcArgs[:len(srcArgs):len(srcArgs)], f.BeforeID, f.BeforeID)
	parents := `SELECT parent_id FROM ` + rows + src + ` AND parent_id IS NOT NULL AND (? = 0 OR parent_id < ?)`
	if f.EventType != "" || f.DeliveryID != "" || f.OrderKey != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.Parent > 0 {
		// Other terms may leave out rows of the status: all of them.
		return `id IN (` + own + ` UNION ALL ` + parents + `)`, slices.Concat(ownArgs, ownArgs)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	top := own + ` ORDER BY id DESC LIMIT ?`
	topArgs := append(ownArgs, limit)
	return `id IN (SELECT id FROM (` + top + `) UNION ALL ` + parents + `
        AND id > (SELECT CASE WHEN count(*) = ? THEN min(id) ELSE 0 END FROM (` + top + `)))`,
		slices.Concat(topArgs, ownArgs, []any{limit}, topArgs)
}

// filterSQL turns f into a WHERE clause (with a leading space) and its args.
func filterSQL(f hookbox.Filter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		conds = append(conds, cond)
		args = append(args, arg)
	}
	if f.Source != "" {
		// The source's events and their targets' deliveries ("source/…":
		// '0' follows '/').
		conds = append(conds, "(source = ? OR (source > ? AND source < ?))")
		args = append(args, f.Source, f.Source+"/", f.Source+"0")
	}
	if f.Status != "" {
		add(statusSummary+" = ?", string(f.Status))
	}
	if f.EventType != "" {
		add("event_type = ?", f.EventType)
	}
	if f.DeliveryID != "" {
		add("delivery_id = ?", f.DeliveryID)
	}
	if f.OrderKey != "" {
		add("order_key = ?", f.OrderKey)
	}
	if !f.Since.IsZero() {
		add("created_at >= ?", millis(f.Since))
	}
	if !f.Until.IsZero() {
		add("created_at < ?", millis(f.Until))
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	if f.Parent > 0 {
		add("parent_id = ?", f.Parent)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// encodeHeader is what the events table keeps of a delivery's header: a
// delivery without one (a library caller's) is kept as {}, as PostgreSQL
// keeps it, so both stores read it back as an empty header.
func encodeHeader(h http.Header) []byte {
	if h == nil {
		return []byte("{}")
	}
	return hookbox.EncodeHeader(h)
}
