package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

// insertEvents stores a batch in one statement: each new event's data
// (event_data) and its queue row (queue; see migration 00010), pending, or
// done for a FanOut event, which is never claimed. events_id_seq is the
// sequence behind event_data's bigserial id (the table was named events).
//
// Ids are drawn in batch order (the inner ORDER BY; PostgreSQL evaluates
// nextval after that sort), so they follow arrival order (but a repeat
// stored in a later round, see hookbox.InsertInOrder, comes after the rest
// of its batch), while the rows are inserted in key order (the outer ORDER
// BY), so two statements whose batches share keys take the keys' index
// entries in the same order and cannot deadlock each other.
//
// Rows that conflict with a stored (source, delivery_id) or (source,
// body_sha256) are skipped and not returned. When the conflicting row
// belongs to a transaction still in progress, PostgreSQL waits for it: if it
// commits, the row here is skipped; if it rolls back, the row here is
// inserted. So every key this statement skips belongs to a committed row.
//
// A new event is due at the database's now(), the clock claims judge by,
// not at received_at: that is the receiving host's clock, which may be
// ahead of the database's (by minutes), and its events would wait that
// long. received_at stays what it is, the host's receipt time, shown and
// filtered on. The queue row's updated_at is that receipt on the
// database's clock ($10, received_at as fromNow), the clock a purge
// judges it by: a FanOut event (a store_only source's among them) is
// finished as it is stored, and stamped by a host whose clock was behind
// it looked old to every purge.
var insertEvents = `WITH d AS (
    SELECT nextval('events_id_seq') AS id, d.*
    FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::jsonb[], $6::bytea[], $7::timestamptz[], $8::bytea[],
                $9::boolean[], $10::bigint[])
        WITH ORDINALITY AS d(source, delivery_id, id_is_hash, event_type, headers, payload, received_at, body_sha256, fanout,
            received_in, n)
    ORDER BY n
), stored AS (
    INSERT INTO event_data (id, source, delivery_id, id_is_hash, event_type, headers, payload, created_at, body_sha256)
    SELECT id, source, delivery_id, id_is_hash, event_type, headers, payload, received_at, body_sha256
    FROM d
    ORDER BY source, delivery_id
    ON CONFLICT DO NOTHING
    RETURNING id, source, delivery_id
), queued AS (
    INSERT INTO queue (id, source, status, next_attempt_at, updated_at, fanout)
    SELECT d.id, d.source, CASE WHEN d.fanout THEN 'done' ELSE 'pending' END, now(), ` + dbNow("d.received_in") + `, d.fanout
    FROM stored JOIN d ON d.id = stored.id
    ORDER BY d.id
)
SELECT id, source, delivery_id FROM stored`

// insertDeliveries stores the deliveries of FanOut events (see
// hookbox.Route): each copies its event's data ($1, by index into the
// arrays of the event's batch) under the queue name $2 with order key $3.
// Their keys are new (an event's id is), so they never conflict. Each is
// due at the database's now(), as insertEvents' events are.
const insertDeliveries = `WITH r AS (
    SELECT nextval('events_id_seq') AS id, r.*
    FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS r(parent_id, source, order_key, n)
    ORDER BY n
), stored AS (
    INSERT INTO event_data (id, source, delivery_id, id_is_hash, event_type, headers, payload, created_at, parent_id)
    SELECT r.id, r.source, e.delivery_id, e.id_is_hash, e.event_type, e.headers, e.payload, e.created_at, e.id
    FROM r JOIN event_data e ON e.id = r.parent_id
    ORDER BY r.n
    RETURNING id, created_at
)
INSERT INTO queue (id, source, next_attempt_at, updated_at, order_key)
SELECT r.id, r.source, now(), stored.created_at, r.order_key
FROM r JOIN stored ON stored.id = r.id
ORDER BY r.id`

// selectConflicts finds the rows that the keys insertEvents skipped
// conflicted with: by (source, delivery_id), and by (source, body_sha256)
// for deliveries that set it. It runs as a statement of its own: under
// READ COMMITTED its snapshot is taken after the INSERT finished waiting,
// so it sees the rows the INSERT conflicted with.
const selectConflicts = `SELECT id, source, delivery_id, body_sha256 FROM event_data
WHERE (source, delivery_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
UNION ALL
SELECT id, source, delivery_id, body_sha256 FROM event_data
WHERE body_sha256 IS NOT NULL AND (source, body_sha256) IN (SELECT * FROM unnest($3::text[], $4::bytea[]))`

// ingestIdle is how long the server lets an ingest transaction that may
// send maxBytes sit idle before it ends the session. An ingest's steps
// follow each other within milliseconds; a transaction idle for longer
// than its steps may take is one whose connection was lost without a word
// (a firewall dropping it silently): hookbox has given up on it
// (ingestContext), but the server would keep it open, and the keys of the
// deliveries it inserted locked, until its own keepalive noticed, so each
// retry of those deliveries waited for the locks and got 503. The server
// counts the time a statement takes to arrive as idle too, so the limit
// grows with the bytes, at ingestBytesPerSecond, as the steps' own bounds
// do.
func ingestIdle(maxBytes int64) time.Duration {
	return ingestIdleBase + time.Duration(maxBytes)*time.Second/ingestBytesPerSecond
}

// ingestIdleBase is ingestIdle for an empty transaction: well past any
// step's bound.
const ingestIdleBase = 10 * time.Second

// beginIngestQuery opens an ingest transaction in one round trip (each
// store builds it once: Store.beginIngestQ). It states what ingest relies
// on rather than inheriting it from the server, the role or the URL: READ
// COMMITTED (selectConflicts must see rows committed after the transaction
// began), a commit that waits for the WAL flush (a receipt is acknowledged
// to the sender), a lock wait short enough that two ingest transactions
// holding keys the other needs give up and redo long before the server's
// deadlock_timeout (1 s by default, and only a superuser may lower it)
// would find the cycle, and an end to a transaction idle longer than idle
// (ingestIdle). With generic, its statements are planned generically
// (see genericPlans).
func beginIngestQuery(idle time.Duration, generic bool) string {
	q := fmt.Sprintf(`BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL synchronous_commit = on; SET LOCAL lock_timeout = '300ms'; SET LOCAL idle_in_transaction_session_timeout = %d`,
		idle.Milliseconds())
	if generic {
		q += `; ` + genericPlans
	}
	return q
}

// genericPlans lets an ingest transaction run insertEvents on the plan
// prepared on its connection, where every other statement is planned
// again for its arguments (force_custom_plan, see sessionSettings).
// insertEvents reads no table (it joins its own CTEs; its ON CONFLICT
// uses every unique index whatever the plan), so its generic plan is the
// same on an empty table and a large one, and planning it again cost
// about 0.1 ms of the server's CPU per batch: the lone delivery at one
// connection took 0.87 ms at the median with it, 0.75 ms without, and
// wrk's 64 connections got 7% more (BENCHMARKS.md, session 28). The
// statements of an ingest that do read a table, insertDeliveries and
// selectConflicts, go back to custom plans around themselves
// (ingestTx.query). Neither is set where the URL sets plan_cache_mode.
const (
	genericPlans = `SET LOCAL plan_cache_mode = force_generic_plan`
	customPlans  = `SET LOCAL plan_cache_mode = force_custom_plan`
)

// maxIngestAttempts bounds how often one Add runs again after the server
// rolled its transaction back because of a conflict with another
// transaction (a deadlock, a lock wait that timed out).
const maxIngestAttempts = 6

// Each step of an ingest (BeginIngest, one Add with whatever it redoes,
// Commit) gets at most this long, plus a second per ingestBytesPerSecond
// it sends, so that a server that stopped answering (a network that drops
// packets) turns into ErrUnavailable, and a 503 for the senders, within
// about a second and a half instead of when the caller's context ends.
// When a step's time is up the connection is closed at once rather than
// cancelled politely (see closeOnCancel).
const (
	ingestBeginTimeout   = time.Second // acquiring a connection (connecting, if need be) and BEGIN
	ingestStepTimeout    = 1500 * time.Millisecond
	ingestRollback       = 500 * time.Millisecond // a healthy server rolls back in well under a millisecond
	ingestBytesPerSecond = 8 << 20
)

// ingestContext bounds one step of an ingest that sends size bytes.
func ingestContext(ctx context.Context, limit time.Duration, size int) (context.Context, context.CancelFunc) {
	limit += time.Duration(size) * time.Second / ingestBytesPerSecond
	return context.WithTimeout(closeOnCancel(ctx), limit)
}

// key identifies an event.
type key struct{ source, deliveryID string }

// Ingest stores ds in one transaction; see hookbox.Store and BeginIngest.
// Deliveries that cannot be stored are left out and the others committed;
// the error is then a *hookbox.BadDeliveries.
func (s *Store) Ingest(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	return hookbox.IngestInOne(ctx, s, ds)
}

// BeginIngest opens a transaction that deliveries are added to in batches;
// see hookbox.IngestBeginner. The receiver keeps one filling while the
// previous one commits.
//
// The transaction keeps the deliveries of every Add so that it can be
// redone: when the server rolls it back because of another process's
// ingest (a deadlock or a lock wait that timed out, as two transactions
// that each took several batches can hold keys the other needs), or when
// one delivery makes a statement fail, the transaction is begun again,
// the earlier Adds are replayed as one batch, and the Add goes on.
// The receipts an Add returned are rewritten in place by a redo (a key
// that was new may now be a duplicate of the other process's row), so
// they are to be read once Commit has returned nil.
//
// A delivery that cannot be stored (see Add) never fails the others: its
// Add returns a *hookbox.BadDeliveries naming it, and the transaction goes
// on without it.
func (s *Store) BeginIngest(ctx context.Context) (hookbox.IngestTx, error) {
	ctx, cancel := ingestContext(ctx, ingestBeginTimeout, 0)
	defer cancel()
	tx, err := s.beginIngest(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: ingest: %w", err)
	}
	return &ingestTx{s: s, tx: tx}, nil
}

// beginIngest begins an ingest transaction, waiting while the server
// refuses the pool a new connection (waitingPool): answering 503 at the
// first refusal turned deliveries away while the workers drained a
// backlog.
func (s *Store) beginIngest(ctx context.Context) (pgx.Tx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.beginIngestQ})
	switch {
	case err == nil:
		return tx, nil
	case tooManyConnections(err):
		return nil, fmt.Errorf("%w: begin: %w: %v", hookbox.ErrUnavailable, hookbox.ErrTooManyConnections, err)
	default:
		return nil, fmt.Errorf("%w: begin: %v", hookbox.ErrUnavailable, err)
	}
}

// ingestTx is an open ingest transaction on one pool connection.
type ingestTx struct {
	s     *Store
	tx    pgx.Tx
	fresh bool        // some Add stored a new row
	adds  []*addBatch // every Add so far, to redo the transaction
}

// addBatch is one Add: its deliveries, the receipts handed out for them
// (rewritten in place by a redo), and the deliveries it refused.
type addBatch struct {
	ds  []hookbox.Delivery
	rs  []hookbox.Receipt
	bad map[int]error
}

// Add inserts ds in the open transaction; see hookbox.IngestTx and
// BeginIngest. A delivery hookbox.CheckStorable refuses (the rule both
// stores apply before any SQL), or whose values the server refuses all
// the same (a data exception, SQLSTATE class 22, or a program limit,
// class 54) is left out: the error is then a *hookbox.BadDeliveries and the others are in
// the transaction.
func (t *ingestTx) Add(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	ctx, cancel := ingestContext(ctx, ingestStepTimeout, payloadBytes(ds))
	defer cancel()
	a := &addBatch{ds: ds, rs: make([]hookbox.Receipt, len(ds)), bad: validate(ds)}
	if err := t.run(ctx, a); err != nil {
		return nil, fmt.Errorf("postgres: ingest: %w", err)
	}
	t.adds = append(t.adds, a)
	if len(a.bad) > 0 {
		return a.rs, &hookbox.BadDeliveries{Bad: a.bad}
	}
	return a.rs, nil
}

// run inserts a, redoing the transaction while the server rolls it back
// for a conflict with another transaction, and isolating the deliveries
// that make a statement fail.
func (t *ingestTx) run(ctx context.Context, a *addBatch) error {
	isolating := false
	for attempt := 1; ; attempt++ {
		var err error
		if isolating {
			err = t.isolate(ctx, a)
		} else {
			err = t.insert(ctx, a)
		}
		if err == nil {
			return nil
		}
		switch {
		case !isolating && isDataError(err):
			isolating = true // one delivery (or a few) is at fault: find it
		case retryable(err) && attempt < maxIngestAttempts && ctx.Err() == nil:
		default:
			return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
		}
		if !isolating {
			// Transactions that gave up on each other at the same moment
			// would meet again in the same order: stagger the redos.
			pause := time.Duration(rand.Int64N(int64(attempt) * int64(10*time.Millisecond)))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
		// The failed statement aborted the transaction.
		if err := t.redo(ctx); err != nil {
			return err
		}
	}
}

// insert stores a's deliveries with one INSERT (and one more statement for
// duplicates of stored rows), and a round more for each repeat that its
// first copy does not settle (see hookbox.InsertInOrder).
func (t *ingestTx) insert(ctx context.Context, a *addBatch) error {
	clear(a.rs)
	return hookbox.InsertInOrder(a.ds, a.rs, func(i int) bool { return a.bad[i] != nil }, func(idx []int) error {
		fresh, err := t.insertBatch(ctx, a.ds, idx, a.rs)
		t.fresh = t.fresh || fresh
		return err
	})
}

// isolate stores a's deliveries in halves, each under a savepoint, halving
// again the parts that fail with a data error, down to the single
// deliveries at fault, which it records as bad. It runs only after a
// statement of the whole batch failed, so its extra round trips are paid
// only then.
func (t *ingestTx) isolate(ctx context.Context, a *addBatch) error {
	clear(a.rs)
	if a.bad == nil {
		a.bad = map[int]error{}
	}
	var try func(idx []int) error
	try = func(idx []int) error {
		if len(idx) == 0 {
			return nil
		}
		if _, err := t.tx.Exec(ctx, `SAVEPOINT hookbox_isolate`); err != nil {
			return err
		}
		fresh, err := t.insertBatch(ctx, a.ds, idx, a.rs)
		if err == nil {
			t.fresh = t.fresh || fresh
			_, err = t.tx.Exec(ctx, `RELEASE SAVEPOINT hookbox_isolate`)
			return err
		}
		if !isDataError(err) {
			return err
		}
		if _, err := t.tx.Exec(ctx, `ROLLBACK TO SAVEPOINT hookbox_isolate; RELEASE SAVEPOINT hookbox_isolate`); err != nil {
			return err
		}
		for _, i := range idx {
			a.rs[i] = hookbox.Receipt{}
		}
		if len(idx) == 1 {
			a.bad[idx[0]] = refused(&a.ds[idx[0]], err)
			return nil
		}
		h := len(idx) / 2
		if err := try(idx[:h]); err != nil {
			return err
		}
		return try(idx[h:])
	}
	// A delivery refused is as if it had never come: a repeat of it is
	// tried in a later round, and refused in turn if its values are too.
	return hookbox.InsertInOrder(a.ds, a.rs, func(i int) bool { return a.bad[i] != nil }, try)
}

// redo rolls the transaction back, begins it again and replays every
// earlier Add as one batch, rewriting their receipts in place.
func (t *ingestTx) redo(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		t.tx.Rollback(ctx)
		tx, err := t.s.beginIngest(ctx)
		if err != nil {
			return err
		}
		t.tx = tx
		err = t.replay(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= maxIngestAttempts || ctx.Err() != nil {
			return fmt.Errorf("%w: redo: %v", hookbox.ErrUnavailable, err)
		}
	}
}

// replay inserts the deliveries of every earlier Add as one batch, with
// the outcome of inserting them one Add after another (see
// hookbox.InsertInOrder).
func (t *ingestTx) replay(ctx context.Context) error {
	if len(t.adds) == 0 {
		t.fresh = false
		return nil
	}
	var all []hookbox.Delivery
	skip := map[int]bool{}
	for _, a := range t.adds {
		for i := range a.bad {
			skip[len(all)+i] = true
		}
		all = append(all, a.ds...)
	}
	rs := make([]hookbox.Receipt, len(all))
	t.fresh = false
	err := hookbox.InsertInOrder(all, rs, func(i int) bool { return skip[i] }, func(idx []int) error {
		fresh, err := t.insertBatch(ctx, all, idx, rs)
		t.fresh = t.fresh || fresh
		return err
	})
	if err != nil {
		return err
	}
	for _, a := range t.adds {
		for i := range a.rs {
			if a.bad[i] == nil {
				a.rs[i] = rs[i]
			}
		}
		rs = rs[len(a.rs):]
	}
	return nil
}

// Commit commits; the receipts of every Add hold once it returns nil.
func (t *ingestTx) Commit(ctx context.Context) error {
	ctx, cancel := ingestContext(ctx, ingestStepTimeout, 0)
	defer cancel()
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: ingest: %w: commit: %v", hookbox.ErrUnavailable, err)
	}
	if t.fresh {
		t.s.notifier.signal() // the rows are committed: wake the workers
	}
	return nil
}

// Rollback abandons the transaction within ingestRollback: the receiver
// rolls back the transaction filling behind a failed commit while new
// deliveries queue behind it, and a server that stopped answering must not
// hold them (past the bound the connection is closed instead, which ends
// the transaction just as well).
func (t *ingestTx) Rollback() error {
	ctx, cancel := ingestContext(context.Background(), ingestRollback, 0)
	defer cancel()
	return t.tx.Rollback(ctx)
}

// insertBatch stores the entries idx of ds in the transaction: one
// INSERT, one more for the deliveries of FanOut events, and, when some
// were skipped, one statement to find the rows they conflicted with. It
// fills their receipts and reports whether it stored a new row.
func (t *ingestTx) insertBatch(ctx context.Context, ds []hookbox.Delivery, idx []int, rs []hookbox.Receipt) (fresh bool, err error) {
	if len(idx) == 0 {
		return false, nil
	}
	index := make(map[key]int, len(idx))
	for _, i := range idx {
		index[key{ds[i].Source, ds[i].DeliveryID}] = i
	}
	rows, err := t.tx.Query(ctx, insertEvents, insertArgs(ds, idx)...)
	if err != nil {
		return false, err
	}
	found, err := collectIDs(rows, index, rs)
	if err != nil {
		return false, err
	}
	if err := t.addDeliveries(ctx, ds, idx, rs); err != nil {
		return false, err
	}
	if found < len(idx) {
		if err := t.findConflicts(ctx, ds, idx, rs); err != nil {
			return true, err
		}
	}
	return found > 0, nil
}

// query runs sql, a statement that reads a table, with args, and hands
// its rows to each. In a transaction that plans generically
// (genericPlans) it is planned for its arguments all the same: it goes
// to the server between a SET LOCAL of customPlans and one of
// genericPlans, in the same round trip. A generic plan made while a
// table was small would scan it whole once it is large.
func (t *ingestTx) query(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	if t.s.genericIngest {
		b.Queue(customPlans)
	}
	b.Queue(sql, args...).Query(each)
	if t.s.genericIngest {
		b.Queue(genericPlans)
	}
	return t.tx.SendBatch(ctx, b).Close()
}

// addDeliveries inserts the deliveries of the FanOut events of idx that
// the INSERT just stored (their receipts hold an id, and no duplicate
// yet), in the order of idx.
func (t *ingestTx) addDeliveries(ctx context.Context, ds []hookbox.Delivery, idx []int, rs []hookbox.Receipt) error {
	var parents []int64
	var names, keys []*string
	for _, i := range idx {
		d := &ds[i]
		if !d.FanOut || rs[i].ID == 0 || rs[i].Duplicate {
			continue
		}
		for _, r := range d.Routes {
			name := hookbox.QueueName(d.Source, r.Target)
			var key *string
			if r.OrderKey != "" {
				key = &r.OrderKey
			}
			parents, names, keys = append(parents, rs[i].ID), append(names, &name), append(keys, key)
		}
	}
	if len(parents) == 0 {
		return nil
	}
	return t.query(ctx, insertDeliveries, []any{parents, names, keys}, func(rows pgx.Rows) error {
		rows.Close()
		return rows.Err()
	})
}

// findConflicts fills the receipts that the INSERT left empty with the ids
// of the stored rows their keys conflicted with: the row with the same
// delivery id, else the row with the same body.
func (t *ingestTx) findConflicts(ctx context.Context, ds []hookbox.Delivery, idx []int, rs []hookbox.Receipt) error {
	var sources, ids, bodySources []string
	var sums [][]byte
	for _, i := range idx {
		if rs[i].ID == 0 {
			sources = append(sources, ds[i].Source)
			ids = append(ids, ds[i].DeliveryID)
			if ds[i].BodySHA256 != nil {
				bodySources = append(bodySources, ds[i].Source)
				sums = append(sums, ds[i].BodySHA256)
			}
		}
	}
	byID := map[key]int64{}
	byBody := map[key]int64{}
	err := t.query(ctx, selectConflicts, []any{sources, ids, bodySources, sums}, func(rows pgx.Rows) error {
		var (
			id  int64
			k   key
			sum []byte
		)
		for rows.Next() {
			if err := rows.Scan(&id, &k.source, &k.deliveryID, &sum); err != nil {
				return err
			}
			byID[k] = id
			if sum != nil {
				byBody[key{k.source, string(sum)}] = id
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, i := range idx {
		if rs[i].ID != 0 {
			continue
		}
		d := &ds[i]
		id, ok := byID[key{d.Source, d.DeliveryID}]
		if !ok && d.BodySHA256 != nil {
			id, ok = byBody[key{d.Source, string(d.BodySHA256)}]
		}
		if !ok {
			// The row this delivery conflicted with was deleted (purged)
			// since; the sender's retry will store it anew.
			return fmt.Errorf("event (%q, %s) conflicted with a row that no longer exists",
				d.Source, hookbox.ShortQuote(d.DeliveryID))
		}
		rs[i] = hookbox.Receipt{ID: id, Duplicate: true}
	}
	return nil
}

// collectIDs reads the (id, source, delivery_id) rows the INSERT returned
// into the receipts of the entries index names, and returns how many it
// filled.
func collectIDs(rows pgx.Rows, index map[key]int, rs []hookbox.Receipt) (int, error) {
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
			return n, fmt.Errorf("server returned a row for (%q, %s), which the batch does not hold", k.source, hookbox.ShortQuote(k.deliveryID))
		}
		if rs[i].ID == 0 {
			rs[i] = hookbox.Receipt{ID: id}
			n++
		}
	}
	return n, rows.Err()
}

// validate returns the deliveries of ds that cannot be stored
// (hookbox.CheckStorable, the rule every store applies), with why.
func validate(ds []hookbox.Delivery) map[int]error {
	var bad map[int]error
	for i := range ds {
		if err := hookbox.CheckStorable(&ds[i]); err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = err
		}
	}
	return bad
}

// refused is the error of a delivery whose row the server refused with a
// data error.
func refused(d *hookbox.Delivery, err error) error {
	code := "?"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code = pgErr.Code
	}
	return fmt.Errorf("%w: the database refuses delivery %s (SQLSTATE %s)", hookbox.ErrBadDelivery, hookbox.ShortQuote(d.DeliveryID), code)
}

// payloadBytes is what a batch sends, roughly.
func payloadBytes(ds []hookbox.Delivery) int {
	n := 0
	for i := range ds {
		n += len(ds[i].Payload)
	}
	return n
}

// insertArgs builds the column arrays of insertEvents for the entries in
// idx, in that order.
func insertArgs(ds []hookbox.Delivery, idx []int) []any {
	n := len(idx)
	var (
		sources    = make([]string, n)
		ids        = make([]string, n)
		isHash     = make([]bool, n)
		eventTypes = make([]string, n)
		headers    = make([][]byte, n)
		payloads   = make([][]byte, n)
		times      = make([]time.Time, n)
		sums       = make([][]byte, n)
		fanout     = make([]bool, n)
		receivedIn = make([]int64, n)
		now        = time.Now() // one for the batch, as in newFinishBatch
	)
	for j, i := range idx {
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
		times[j], receivedIn[j] = d.ReceivedAt, d.ReceivedAt.Sub(now).Microseconds() // fromNow
		sums[j] = d.BodySHA256                                                       // nil is NULL
		fanout[j] = d.FanOut
	}
	return []any{sources, ids, isHash, eventTypes, headers, payloads, times, sums, fanout, receivedIn}
}

const eventColumns = `id, source, delivery_id, id_is_hash, event_type, status, attempts, attempt_base,
    next_attempt_at, lease_owner, last_error, created_at, updated_at, parent_id, fanout, order_key, headers`

// queuedColumns are eventColumns read from a queue row q and its
// event_data row d, for statements that change queue rows and return
// their events.
var queuedColumns = qualifyColumns(eventColumns)

// queueColumns are the columns of the events view that come from the queue
// table (migration 00010); the others come from event_data.
var queueColumns = map[string]bool{
	"status": true, "attempts": true, "attempt_base": true, "next_attempt_at": true, "lease_owner": true,
	"last_error": true, "updated_at": true, "fanout": true, "order_key": true,
}

// qualifyColumns prefixes each column of the list cols with the table it
// comes from: q. for queue, d. for event_data.
func qualifyColumns(cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		name := strings.TrimSpace(c)
		table := "d."
		if queueColumns[name] {
			table = "q."
		}
		parts[i] = strings.Replace(c, name, table+name, 1)
	}
	return strings.Join(parts, ",")
}

// statusSummary is the status column as an operator reads it: a FanOut
// event's summarises its deliveries (see hookbox.SummaryStatus).
const statusSummary = `CASE WHEN fanout THEN coalesce((SELECT CASE
        WHEN count(*) = 0 THEN 'stored'
        WHEN bool_or(c.status = 'processing') THEN 'processing'
        WHEN bool_or(c.status = 'pending') THEN 'pending'
        WHEN bool_or(c.status = 'dead') THEN 'dead' ELSE 'done' END
    FROM events c WHERE c.parent_id = events.id), 'stored') ELSE status END`

// statusCandidates holds for the events that may have the status $? as
// statusSummary reads it, when that is pending, processing or dead: the
// queue rows in it, and the FanOut events with a delivery in it, below
// the id $! (0: any). Its reads are as long as the rows in that status,
// which the partial indexes of the unfinished and the dead rows hold:
// each row's parent is looked up by a LATERAL subquery with a LIMIT, one
// primary-key lookup each whatever the statistics say (joined plainly,
// a small table was planned as a walk of every delivery's parent_id). A
// parent below $! may have its deliveries above it: the bound is on the
// parent.
const statusCandidates = `id IN (SELECT q.id FROM queue q WHERE q.status = $? AND ($! = 0 OR q.id < $!)
    UNION ALL SELECT p.parent_id FROM queue q
        CROSS JOIN LATERAL (SELECT d.parent_id FROM event_data d WHERE d.id = q.id LIMIT 1) p
        WHERE q.status = $? AND p.parent_id IS NOT NULL AND ($! = 0 OR p.parent_id < $!))`

// statusWindow is the number of the newest queue rows (below the
// filter's BeforeID) statusTop reads first, for each row of the page: a
// page of a status whose rows are among the newest (a backlog of pending
// events) is found there.
const statusWindow = 10

// statusTopMax is the most rows statusTop's window reads: a page longer
// than statusTopMax/statusWindow (of any status) has its candidates as
// statusCandidates finds them.
const statusTopMax = 10000

// statusOnly reports whether f filters on nothing but a status
// statusCandidates finds (and a BeforeID), for a page statusTop reads:
// its page is the newest rows in the status and the newest FanOut
// events with a delivery in it.
func statusOnly(f hookbox.Filter) bool {
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	return byStatus(f) && limit*statusWindow <= statusTopMax && f.Source == "" && f.EventType == "" && f.DeliveryID == "" && f.OrderKey == "" &&
		f.Since.IsZero() && f.Until.IsZero() && f.Parent == 0
}

// statusTop is the candidates' subquery for a filter that statusOnly
// holds for, and args with its arguments appended (args end with the
// status and f.BeforeID, as statusCandidates takes them). It reads the
// newest queue rows below f.BeforeID, statusWindow for each row of the
// page, by the primary key. When a page's length of them are in the
// status (not FanOut records, which are done), those are the newest of
// it: they are the page's rows, every one listed, and the FanOut events
// on the page are at or above the lowest of them, so their deliveries,
// above them, are among the rows read or above f.BeforeID (read
// through the partial index of the status, as statusCandidates does).
// Otherwise the candidates are statusCandidates's: every row in the
// status. A page of a backlog of a million pending events then reads
// statusWindow rows for each of its own, not the backlog, while a page
// of a few old pending or processing ones reads the window more than it
// did. The dead status, which has an index in id order by source, is
// read by deadTop instead.
func statusTop(f hookbox.Filter, args []any) (string, []any) {
	n := func(i int) string { return "$" + strconv.Itoa(i) }
	st, before := n(len(args)-1), n(len(args))
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	if f.Status == hookbox.StatusDead {
		return deadTop(f.BeforeID, limit, args[:len(args)-2])
	}
	args = append(args, limit, limit*statusWindow)
	lim, win := n(len(args)-1), n(len(args))
	below := ""
	if f.BeforeID > 0 {
		below = ` WHERE w.id < ` + before
	}
	parent := `CROSS JOIN LATERAL (SELECT d.parent_id FROM event_data d WHERE d.id = q.id LIMIT 1) p`
	full := `(SELECT count(*) FROM hits) = ` + lim
	q := `WITH walk AS MATERIALIZED (SELECT w.id, w.status, w.fanout FROM queue w` + below + ` ORDER BY w.id DESC LIMIT ` + win + `),
    hits AS MATERIALIZED (SELECT id FROM walk WHERE status = ` + st + ` AND NOT fanout ORDER BY id DESC LIMIT ` + lim + `)
    SELECT id FROM hits WHERE ` + full + `
    UNION ALL SELECT p.parent_id FROM walk q ` + parent + `
        WHERE ` + full + ` AND q.status = ` + st + ` AND q.id > (SELECT min(id) FROM hits) AND p.parent_id IS NOT NULL`
	if f.BeforeID > 0 {
		q += `
    UNION ALL SELECT p.parent_id FROM queue q ` + parent + `
        WHERE ` + full + ` AND q.status = ` + st + ` AND q.id >= ` + before + ` AND p.parent_id IS NOT NULL AND p.parent_id < ` + before
	}
	old := strings.TrimSuffix(strings.TrimPrefix(strings.NewReplacer("$?", st, "$!", before).Replace(statusCandidates), "id IN ("), ")")
	q += `
    UNION ALL SELECT id FROM (` + old + `) c WHERE NOT ` + full
	return q, args
}

// deadTop is statusTop's subquery for the dead status, whose rows are
// few, and often among the oldest: no window of the newest rows, but
// the index of the dead rows (queue_dead, by source and id), walked
// from one source to the next (one seek each), the page's length of
// each source's newest below beforeID (0: any) read from
// there, and the newest of them taken. Those are all the dead rows
// below before when they are fewer than a page; else the FanOut events
// on the page are at or above the lowest of them, and their deliveries
// above it: only the dead rows above it are read for parents, again by
// source. Its arguments are appended to args (the status, a literal
// here for the partial index, is not one of them).
func deadTop(beforeID int64, limit int, args []any) (string, []any) {
	under, parentUnder := "", ""
	if beforeID > 0 {
		args = append(args, beforeID)
		before := "$" + strconv.Itoa(len(args))
		under = ` AND id < ` + before
		parentUnder = ` AND p.parent_id < ` + before
	}
	args = append(args, limit)
	lim := "$" + strconv.Itoa(len(args))
	return `WITH RECURSIVE srcs AS (SELECT (SELECT min(source) FROM queue WHERE status = 'dead') s
        UNION ALL SELECT (SELECT min(source) FROM queue WHERE status = 'dead' AND source > srcs.s) FROM srcs WHERE srcs.s IS NOT NULL),
    hits AS MATERIALIZED (SELECT t.id FROM srcs CROSS JOIN LATERAL (SELECT id FROM queue
            WHERE status = 'dead' AND source = srcs.s AND NOT fanout` + under + ` ORDER BY id DESC LIMIT ` + lim + `) t
        ORDER BY t.id DESC LIMIT ` + lim + `)
    SELECT id FROM hits
    UNION ALL SELECT p.parent_id FROM srcs
        CROSS JOIN LATERAL (SELECT id FROM queue WHERE status = 'dead' AND source = srcs.s
            AND id > (SELECT CASE WHEN count(*) = ` + lim + ` THEN min(id) ELSE 0 END FROM hits)) q
        CROSS JOIN LATERAL (SELECT d.parent_id FROM event_data d WHERE d.id = q.id LIMIT 1) p
        WHERE p.parent_id IS NOT NULL` + parentUnder, args
}

// listedColumns are eventColumns with the status an operator reads.
var listedColumns = strings.Replace(eventColumns, "status,", statusSummary+",", 1)

// scanEvent reads one row selected with eventColumns followed by the payload
// (or NULL).
func scanEvent(row pgx.Row) (hookbox.Event, error) {
	var (
		e              hookbox.Event
		status         string
		owner, lastErr *string
		parent         *int64
		orderKey       *string
		hdr            []byte
	)
	err := row.Scan(&e.ID, &e.Source, &e.DeliveryID, &e.IDIsHash, &e.EventType, &status,
		&e.Attempts, &e.AttemptBase, &e.NextAttemptAt, &owner, &lastErr, &e.CreatedAt, &e.UpdatedAt,
		&parent, &e.FanOut, &orderKey, &hdr, &e.Payload)
	if err != nil {
		return e, err
	}
	if parent != nil {
		e.Parent = *parent
		_, e.Target = hookbox.SplitQueueName(e.Source)
	}
	if orderKey != nil {
		e.OrderKey = *orderKey
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
	e, err := scanListedEvent(s.pool.QueryRow(ctx, `SELECT `+listedColumns+`, payload, payload IS NULL FROM events WHERE id = $1`, id))
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
	q, args, err := s.eventsStatement(ctx, f)
	if err != nil {
		return nil, queryError("list events", err)
	}
	if q == "" {
		return nil, nil
	}
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

// eventsStatement is the statement Events runs for f, and its
// arguments, after reading f's source scope (bySource); "" when nothing
// can match.
func (s *Store) eventsStatement(ctx context.Context, f hookbox.Filter) (string, []any, error) {
	if !bySource(f) {
		q, args := eventsQuery(f)
		return q, args, nil
	}
	sc, err := s.sourceScope(ctx, f.Source)
	if err != nil || len(sc.names) == 0 {
		return "", nil, err // none: no event has that source, nor a delivery of it
	}
	q, args := eventsQueryIn(f, &sc)
	return q, args, nil
}

// sourceFewRows is the number of rows (events and their deliveries)
// below which a source's listing reads all of them, through the
// (source, delivery_id) index, and sorts them, rather than walk down the
// ids (see sourceScope). SQLite's listing takes the same threshold.
const sourceFewRows = 10000

// sourceWalkIDs is how far down the ids, from the page's start, the
// listing of a source with many rows walks before it reads the rest of
// the page through the (source, delivery_id) index (see eventsQueryIn):
// SQLite's listing takes the same cap.
const sourceWalkIDs = 20000

// sourceScope is what Events learns of a filter's source before listing
// it: the source names its rows have (its own and its targets' queue
// names; none when it has no event), whether they hold fewer than
// sourceFewRows rows, and the highest id of any row.
type sourceScope struct {
	names []string
	few   bool
	top   int64
}

// sourceNamesSQL finds the names of the rows of the source $1: its own
// and its targets' ("source/target"), by the walk of the sources in the
// (source, delivery_id) index that the overview makes, one seek a name.
// The names of targets compare in byte order, as filterSQL's do.
const sourceNamesSQL = `SELECT coalesce(array_agg(source), '{}') FROM (` + overviewSources + `) s
WHERE source = $1 OR (source COLLATE "C" > $1 || '/' AND source COLLATE "C" < $1 || '0')`

// sourceCountSQL counts the rows of the names $1, up to $2, in the
// (source, delivery_id) index, and reads the highest id of any row (the
// primary key's last entry).
const sourceCountSQL = `SELECT (SELECT count(*) FROM (SELECT FROM event_data WHERE source = ANY($1::text[]) LIMIT $2) n),
    (SELECT coalesce(max(id), 0) FROM event_data)`

// bySource reports whether Events lists f by its source's rows: with a
// source and no narrower way in (a delivery id or a parent, each an
// index lookup; a status with its partial index, see statusCandidates).
func bySource(f hookbox.Filter) bool {
	return f.Source != "" && f.DeliveryID == "" && f.Parent == 0 && !byStatus(f)
}

// byStatus reports whether f's status is one statusCandidates finds.
func byStatus(f hookbox.Filter) bool {
	return f.Status == hookbox.StatusPending || f.Status == hookbox.StatusProcessing || f.Status == hookbox.StatusDead
}

// sourceScope reads the scope of the source name: the listing of a
// source walked down the ids past every other source's events to find
// its own (seconds at three million events for a source with few or
// none, or none recent). Its rows are all in the (source, delivery_id)
// index, in the order of their delivery ids: a source with few is
// listed from there; a source with none answers at once. A source with
// many is walked down the ids from the page's start, which finds its
// newest rows soon, but only for sourceWalkIDs ids: the rest of a page
// the walk did not fill (a source quiet of late, a filter few of its
// rows match) is read from that index below the walk (see
// eventsQueryIn). An index in id order of each source's rows would
// answer every page at once, at the cost of one more index entry
// written by every ingest: not taken.
func (s *Store) sourceScope(ctx context.Context, source string) (sourceScope, error) {
	var sc sourceScope
	if err := s.pool.QueryRow(ctx, sourceNamesSQL, source).Scan(&sc.names); err != nil || len(sc.names) == 0 {
		return sc, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, sourceCountSQL, sc.names, sourceFewRows).Scan(&n, &sc.top); err != nil {
		return sc, err
	}
	sc.few = n < sourceFewRows
	return sc, nil
}

// eventsQuery is the statement Events runs for f, and its arguments,
// when it has not read f's source scope.
func eventsQuery(f hookbox.Filter) (string, []any) { return eventsQueryIn(f, nil) }

// eventsQueryIn is the statement Events runs for f, and its arguments:
// with a source scope (bySource), its source is matched by the names
// of its rows, and a source with few rows has them all read (the
// materialized ids: the server would otherwise walk down every id from
// the newest, expecting the source's rows to be spread evenly) and the
// newest of them listed, looked up by id (as an array: as a subquery,
// they were joined by a walk down the ids from the newest to theirs).
// A source with many rows is walked down the ids from the page's start
// to sourceWalkIDs below it (walkFloor); when that walk did not fill the
// page, its rest is the newest of the source's matching rows below the
// walk, read as a small source's are. Both run in one statement, so the
// page is read in one snapshot, and a listing never costs much more
// than reading the source's rows, where an uncapped walk read every row
// above them (6.5 s at three million events for a source of 30,000 old
// ones).
func eventsQueryIn(f hookbox.Filter, scope *sourceScope) (string, []any) {
	return eventsQueryBy(f, scope, statusOnly(f))
}

// eventsQueryBy is eventsQueryIn, with a status's candidates read by
// statusTop when top is set (statusOnly must hold for f), else by
// statusCandidates.
func eventsQueryBy(f hookbox.Filter, scope *sourceScope, top bool) (string, []any) {
	var names []string
	if scope != nil {
		names = scope.names
	}
	where, args := filterSQLIn(f, names)
	if byStatus(f) {
		// The rows that can read so, found through the partial index of
		// their status (queue_due, queue_dead): a walk down the ids
		// checking each event's status read every done event below the
		// page's last (seconds, for a page of the dead ones). Not for
		// Replay, whose slices walk up the ids from the last one's: the
		// candidates, all of them for each slice, would cost each slice
		// as much as every event in the status.
		args = append(args, string(f.Status), f.BeforeID)
		cond := strings.NewReplacer("$?", "$"+strconv.Itoa(len(args)-1), "$!", "$"+strconv.Itoa(len(args))).Replace(statusCandidates)
		if top {
			var q string
			q, args = statusTop(f, args)
			// As an array, looked up by id: as a subquery, they were
			// joined by a walk down the ids from the newest to theirs.
			cond = `id = ANY(ARRAY(` + q + `))`
		}
		if where == "" {
			where = " WHERE " + cond
		} else {
			where += " AND " + cond
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	args = append(args, limit)
	lim := `$` + strconv.Itoa(len(args))
	columns := `SELECT ` + listedColumns + `, NULL::bytea, payload IS NULL FROM events`
	ids := idsTable(f)
	if scope != nil && scope.few {
		return `WITH matched AS MATERIALIZED (SELECT id FROM ` + ids + where + `)
` + columns + `
WHERE id = ANY(ARRAY(SELECT id FROM matched ORDER BY id DESC LIMIT ` + lim + `)) ORDER BY id DESC LIMIT ` + lim, args
	}
	if floor := walkFloor(f, scope); floor > 0 {
		// The walk's ids, then, only if they are fewer than a page,
		// every matching id below the walk, materialized as a small
		// source's are, and the newest of them. The count is a
		// one-time filter on the read of rest, which the server runs
		// only when it is first read: otherwise rest is not run at all
		// (put inside rest, the count let the server start the
		// parallel workers of a plan that then read nothing, 3 ms).
		args = append(args, floor)
		fl := `$` + strconv.Itoa(len(args))
		return `WITH walk AS MATERIALIZED (SELECT id FROM ` + ids + where + ` AND id >= ` + fl + ` ORDER BY id DESC LIMIT ` + lim + `),
    rest AS MATERIALIZED (SELECT id FROM ` + ids + where + ` AND id < ` + fl + `)
` + columns + `
WHERE id = ANY(ARRAY(SELECT id FROM walk
    UNION ALL (SELECT id FROM rest WHERE (SELECT count(*) FROM walk) < ` + lim + ` ORDER BY id DESC LIMIT ` + lim + `)))
ORDER BY id DESC LIMIT ` + lim, args
	}
	return columns + where + ` ORDER BY id DESC LIMIT ` + lim, args
}

// idsTable is where a listing by source reads the ids of f's rows:
// event_data when f names no column of the queue table (a status, an
// order key), so that each row the listing reads is not joined to its
// queue row as the events view joins it (a primary-key lookup each: 90%
// of what a page of a source of 30,000 old events read). Every
// event_data row has its queue row (migration 00016; ingest and purge
// write both in one statement), so the ids are the view's.
func idsTable(f hookbox.Filter) string {
	if f.Status != "" || f.OrderKey != "" {
		return "events"
	}
	return "event_data"
}

// walkFloor is the lowest id the listing of f walks down to, for a
// source with many rows: sourceWalkIDs below the page's start (its
// BeforeID, or above the highest id). It is 0, no floor, without a
// scope, for a source with few rows, and when the walk would reach the
// first id anyway.
func walkFloor(f hookbox.Filter, scope *sourceScope) int64 {
	if scope == nil || scope.few {
		return 0
	}
	start := f.BeforeID
	if start <= 0 || start > scope.top {
		start = scope.top + 1
	}
	return max(start-sourceWalkIDs, 0)
}

// filterSQL turns f into a WHERE clause (with a leading space) and its
// arguments, numbered from $1.
func filterSQL(f hookbox.Filter) (string, []any) { return filterSQLIn(f, nil) }

// filterSQLIn is filterSQL, matching the source by names, the names of
// its rows (see sourceScope), when they are given.
func filterSQLIn(f hookbox.Filter, names []string) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.Source != "" && names != nil {
		add("source = ANY($?::text[])", names)
	} else if f.Source != "" {
		// The source's events and their targets' deliveries ("source/…":
		// '0' follows '/'). Both bounds compare in byte order.
		add("(source = $? OR (source COLLATE \"C\" > $? || '/' AND source COLLATE \"C\" < $? || '0'))", f.Source)
	}
	if f.Status != "" {
		add(statusSummary+" = $?", string(f.Status))
	}
	if f.EventType != "" {
		add("event_type = $?", f.EventType)
	}
	if f.DeliveryID != "" {
		add("delivery_id = $?", f.DeliveryID)
	}
	if f.OrderKey != "" {
		add("order_key = $?", f.OrderKey)
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
	if f.Parent > 0 {
		add("parent_id = $?", f.Parent)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}
