package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

// insertEvents stores a batch in one statement. events_id_seq is the
// sequence behind the bigserial id column.
//
// Ids are drawn in batch order (the inner ORDER BY; PostgreSQL evaluates
// nextval after that sort), so they follow arrival order, while the rows are
// inserted in key order (the outer ORDER BY), so two transactions whose
// batches share keys take the keys' index entries in the same order and
// cannot deadlock.
//
// Rows that conflict with a stored (source, delivery_id) are skipped and not
// returned. When the conflicting row belongs to a transaction still in
// progress, PostgreSQL waits for it: if it commits, the row here is skipped;
// if it rolls back, the row here is inserted. So every key this statement
// skips belongs to a committed row.
const insertEvents = `WITH d AS (
    SELECT nextval('events_id_seq') AS id, d.*
    FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::jsonb[], $6::bytea[], $7::timestamptz[])
        WITH ORDINALITY AS d(source, delivery_id, id_is_hash, event_type, headers, payload, received_at, n)
    ORDER BY n
)
INSERT INTO events
    (id, source, delivery_id, id_is_hash, event_type, headers, payload, next_attempt_at, created_at, updated_at)
SELECT id, source, delivery_id, id_is_hash, event_type, headers, payload, received_at, received_at, received_at
FROM d
ORDER BY source, delivery_id
ON CONFLICT (source, delivery_id) DO NOTHING
RETURNING id, source, delivery_id`

// selectEventIDs finds the rows of keys that insertEvents skipped. It runs as
// a statement of its own: under READ COMMITTED its snapshot is taken after
// the INSERT finished waiting, so it sees the rows the INSERT conflicted with.
const selectEventIDs = `SELECT id, source, delivery_id FROM events
WHERE (source, delivery_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

// maxIngestAttempts bounds how often Ingest runs its INSERT when the server
// rolled it back because of a conflict with another transaction, or when the
// request never reached the server.
const maxIngestAttempts = 3

// key identifies an event.
type key struct{ source, deliveryID string }

// Ingest stores ds in one transaction; see hookbox.Store.
//
// The distinct deliveries of the batch go to the server in one INSERT over
// unnest arrays, which is a transaction of its own: one round trip when none
// of them was stored before. Ids follow the order of ds. The ids of the
// deliveries that were stored before (the duplicates) are then read with one
// more statement. Repeats inside ds are resolved in memory. When new rows
// were stored, a NOTIFY for Listen follows, sent apart from the ingest (see
// NotifyChannel).
//
// A database failure returns an error matching hookbox.ErrUnavailable. A
// delivery whose source, id or event type is not valid UTF-8, or holds a NUL
// byte, cannot be stored as PostgreSQL text; Ingest then stores nothing and
// returns an error that does not match ErrUnavailable, since retrying cannot
// help.
func (s *Store) Ingest(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	// Through the pool, the INSERT is a transaction of its own: a failed
	// attempt left nothing behind, so it may be retried.
	rs, fresh, err := ingestWith(ctx, s.pool, maxIngestAttempts, ds)
	if fresh {
		s.notifier.signal() // the rows are committed: wake the workers
	}
	return rs, err
}

// ingestWith stores ds through q, the pool or an open transaction, trying
// the INSERT up to attempts times while it fails in a way worth retrying.
// Only the INSERT is retried: once it has committed, running it again would
// report its own rows as duplicates. fresh reports whether it stored a new
// row, even when a later step failed.
func ingestWith(ctx context.Context, q querier, attempts int, ds []hookbox.Delivery) (rs []hookbox.Receipt, fresh bool, err error) {
	rs = make([]hookbox.Receipt, len(ds))
	if len(ds) == 0 {
		return rs, false, nil
	}
	distinct, first := hookbox.DistinctDeliveries(ds)
	if err := validate(ds, distinct); err != nil {
		return nil, false, fmt.Errorf("postgres: ingest: %w", err)
	}
	args, err := insertArgs(ds, distinct)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: ingest: %w", err)
	}
	index := make(map[key]int, len(distinct))
	for _, i := range distinct {
		index[key{ds[i].Source, ds[i].DeliveryID}] = i
	}
	var found int
	for attempt := 1; ; attempt++ {
		found, err = insert(ctx, q, args, index, rs)
		if err == nil {
			break
		}
		if attempt >= attempts || !retryable(err) || ctx.Err() != nil {
			return nil, false, fmt.Errorf("postgres: ingest: %w: %v", hookbox.ErrUnavailable, err)
		}
	}
	if found < len(distinct) {
		if err := findDuplicates(ctx, q, ds, distinct, index, rs); err != nil {
			return nil, found > 0, fmt.Errorf("postgres: ingest: %w: %v", hookbox.ErrUnavailable, err)
		}
	}
	hookbox.CopyRepeats(rs, first)
	return rs, found > 0, nil
}

// insert runs insertEvents through q and fills the receipts of the rows it
// inserted; it returns their number.
func insert(ctx context.Context, q querier, args []any, index map[key]int, rs []hookbox.Receipt) (int, error) {
	for _, i := range index {
		rs[i] = hookbox.Receipt{}
	}
	// Through the pool the statement is its own implicit transaction: once
	// its rows are read to the end without error, the server has committed
	// it.
	rows, err := q.Query(ctx, insertEvents, args...)
	if err != nil {
		return 0, err
	}
	return collectIDs(rows, index, rs, false)
}

// findDuplicates fills the receipts that insert left empty with the ids of
// the stored rows their keys conflicted with.
func findDuplicates(ctx context.Context, q querier, ds []hookbox.Delivery, distinct []int, index map[key]int, rs []hookbox.Receipt) error {
	var sources, ids []string
	for _, i := range distinct {
		if rs[i].ID == 0 {
			sources = append(sources, ds[i].Source)
			ids = append(ids, ds[i].DeliveryID)
		}
	}
	rows, err := q.Query(ctx, selectEventIDs, sources, ids)
	if err != nil {
		return err
	}
	if _, err := collectIDs(rows, index, rs, true); err != nil {
		return err
	}
	for _, i := range distinct {
		if rs[i].ID == 0 {
			// The row this delivery conflicted with was deleted (purged)
			// since; the sender's retry will store it anew.
			return fmt.Errorf("event (%q, %q) conflicted with a row that no longer exists",
				ds[i].Source, ds[i].DeliveryID)
		}
	}
	return nil
}

// querier is what a pool and a transaction have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// BeginIngest opens a transaction that deliveries are added to in batches;
// see hookbox.IngestBeginner. The receiver keeps one filling while the
// previous one commits. A transaction that fails (a deadlock with another
// process's ingest included) fails every delivery in it with
// ErrUnavailable, and their senders retry.
func (s *Store) BeginIngest(ctx context.Context) (hookbox.IngestTx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: ingest: %w: begin: %v", hookbox.ErrUnavailable, err)
	}
	return &ingestTx{s: s, tx: tx}, nil
}

// ingestTx is an open ingest transaction on one pool connection.
type ingestTx struct {
	s     *Store
	tx    pgx.Tx
	fresh bool // some Add stored a new row
}

// Add inserts ds in the open transaction; see hookbox.IngestTx.
// A failed statement aborts the transaction, so nothing is retried here.
func (t *ingestTx) Add(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	rs, fresh, err := ingestWith(ctx, t.tx, 1, ds)
	t.fresh = t.fresh || fresh
	return rs, err
}

// Commit commits; the receipts of every Add hold once it returns nil.
func (t *ingestTx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: ingest: %w: commit: %v", hookbox.ErrUnavailable, err)
	}
	if t.fresh {
		t.s.notifier.signal() // the rows are committed: wake the workers
	}
	return nil
}

// Rollback abandons the transaction.
func (t *ingestTx) Rollback() error { return t.tx.Rollback(context.Background()) }

// collectIDs reads (id, source, delivery_id) rows into the receipts of the
// entries index names, and returns how many it filled.
func collectIDs(rows pgx.Rows, index map[key]int, rs []hookbox.Receipt, duplicate bool) (int, error) {
	defer rows.Close()
	n := 0
	var k key
	var id int64
	for rows.Next() {
		if err := rows.Scan(&id, &k.source, &k.deliveryID); err != nil {
			return n, err
		}
		i, ok := index[k]
		if !ok {
			return n, fmt.Errorf("server returned a row for (%q, %q), which the batch does not hold", k.source, k.deliveryID)
		}
		if rs[i].ID == 0 {
			rs[i] = hookbox.Receipt{ID: id, Duplicate: duplicate}
			n++
		}
	}
	return n, rows.Err()
}

// validate checks that the text columns of the distinct deliveries can be
// stored: PostgreSQL text holds valid UTF-8 without NUL bytes.
func validate(ds []hookbox.Delivery, distinct []int) error {
	for _, i := range distinct {
		d := &ds[i]
		for _, f := range [...]struct{ name, v string }{
			{"source", d.Source}, {"delivery id", d.DeliveryID}, {"event type", d.EventType},
		} {
			if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
				return fmt.Errorf("delivery %d: %s %q is not UTF-8 text without NUL bytes", i, f.name, f.v)
			}
		}
		for name, vs := range d.Header {
			if strings.IndexByte(name, 0) >= 0 {
				return fmt.Errorf("delivery %d: header name %q holds a NUL byte", i, name)
			}
			for _, v := range vs {
				if strings.IndexByte(v, 0) >= 0 {
					return fmt.Errorf("delivery %d: header %q holds a NUL byte", i, name)
				}
			}
		}
	}
	return nil
}

// insertArgs builds the column arrays of insertEvents for the entries in
// distinct, in that order.
func insertArgs(ds []hookbox.Delivery, distinct []int) ([]any, error) {
	n := len(distinct)
	var (
		sources    = make([]string, n)
		ids        = make([]string, n)
		isHash     = make([]bool, n)
		eventTypes = make([]string, n)
		headers    = make([][]byte, n)
		payloads   = make([][]byte, n)
		times      = make([]time.Time, n)
	)
	for j, i := range distinct {
		d := &ds[i]
		sources[j], ids[j], isHash[j], eventTypes[j] = d.Source, d.DeliveryID, d.IDIsHash, d.EventType
		hdr := []byte("{}")
		if d.Header != nil {
			hdr = hookbox.EncodeHeader(d.Header)
		}
		headers[j] = hdr
		// NULL is kept for "payload dropped"; an empty body is stored as such.
		payloads[j] = d.Payload
		if payloads[j] == nil {
			payloads[j] = []byte{}
		}
		times[j] = d.ReceivedAt
	}
	return []any{sources, ids, isHash, eventTypes, headers, payloads, times}, nil
}

const eventColumns = `id, source, delivery_id, id_is_hash, event_type, status, attempts, attempt_base,
    next_attempt_at, lease_owner, last_error, created_at, updated_at, headers`

// scanEvent reads one row selected with eventColumns followed by the payload
// (or NULL).
func scanEvent(row pgx.Row) (hookbox.Event, error) {
	var (
		e              hookbox.Event
		status         string
		owner, lastErr *string
		hdr            []byte
	)
	err := row.Scan(&e.ID, &e.Source, &e.DeliveryID, &e.IDIsHash, &e.EventType, &status,
		&e.Attempts, &e.AttemptBase, &e.NextAttemptAt, &owner, &lastErr, &e.CreatedAt, &e.UpdatedAt, &hdr, &e.Payload)
	if err != nil {
		return e, err
	}
	e.Status = hookbox.Status(status)
	// pgx reads NULL as nil and an empty bytea as empty: only payload
	// retention leaves NULL. (scanListedEvent overrides this for rows
	// read without their payload.)
	e.PayloadCleared = e.Payload == nil
	e.NextAttemptAt, e.CreatedAt, e.UpdatedAt = e.NextAttemptAt.UTC(), e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	if owner != nil {
		e.LeaseOwner = *owner
	}
	if lastErr != nil {
		e.LastError = *lastErr
	}
	e.Header, err = rowscan.Header(e.ID, hdr)
	return e, err
}

// scanListedEvent reads one row selected with eventColumns, the payload (or
// NULL) and payload IS NULL.
func scanListedEvent(row pgx.Row) (hookbox.Event, error) {
	var cleared bool
	e, err := scanEvent(rowscan.WithCleared{Row: row, Cleared: &cleared})
	e.PayloadCleared = cleared
	return e, err
}

// Event returns one event with headers and payload. A missing event gives an
// error matching hookbox.ErrNotFound. An empty payload is zero bytes, never
// nil; a cleared one is nil, with PayloadCleared set.
func (s *Store) Event(ctx context.Context, id int64) (hookbox.Event, error) {
	e, err := scanListedEvent(s.pool.QueryRow(ctx, `SELECT `+eventColumns+`, payload, payload IS NULL FROM events WHERE id = $1`, id))
	if err != nil {
		return hookbox.Event{}, queryError(fmt.Sprintf("event %d", id), err)
	}
	if !e.PayloadCleared && e.Payload == nil {
		e.Payload = []byte{}
	}
	return e, nil
}

// Events lists events matching f, newest first, without payloads.
func (s *Store) Events(ctx context.Context, f hookbox.Filter) ([]hookbox.Event, error) {
	where, args := filterSQL(f)
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	args = append(args, limit)
	q := `SELECT ` + eventColumns + `, NULL::bytea, payload IS NULL FROM events` + where +
		` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, queryError("list events", err)
	}
	defer rows.Close()
	var out []hookbox.Event
	for rows.Next() {
		e, err := scanListedEvent(rows)
		if err != nil {
			return nil, queryError("list events", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError("list events", err)
	}
	return out, nil
}

// filterSQL turns f into a WHERE clause (with a leading space) and its
// arguments, numbered from $1.
func filterSQL(f hookbox.Filter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.Source != "" {
		add("source = $?", f.Source)
	}
	if f.Status != "" {
		add("status = $?", string(f.Status))
	}
	if f.EventType != "" {
		add("event_type = $?", f.EventType)
	}
	if !f.Since.IsZero() {
		add("created_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("created_at < $?", f.Until)
	}
	if f.BeforeID > 0 {
		add("id < $?", f.BeforeID)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}
