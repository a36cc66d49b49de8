package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

// Skip ends one dead delivery for good; see hookbox.Ops. It locks the
// queue row and reads it (its attempts among it, for p.Expect: the
// locking read returns the row's latest committed version, and nothing
// can change it until the commit), has hookbox.SkipParams.Judge decide,
// and changes the row and writes its attempts row in the same
// transaction.
func (s *Store) Skip(ctx context.Context, p hookbox.SkipParams) (hookbox.SkipResult, error) {
	res := hookbox.SkipResult{ID: p.ID}
	op := fmt.Sprintf("skip %d", p.ID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return res, opError(ctx, op, err)
	}
	defer tx.Rollback(ctx)
	var d hookbox.SkipCandidate
	err = tx.QueryRow(ctx, `SELECT q.status, d.delivery_id, q.order_key, q.attempts, q.fanout
        FROM queue q JOIN event_data d ON d.id = q.id WHERE q.id = $1 FOR NO KEY UPDATE OF q`, p.ID).
		Scan(&d.Status, &d.DeliveryID, &d.OrderKey, &d.Attempts, &d.FanOut)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, fmt.Errorf("event %d: %w", p.ID, hookbox.ErrNotFound)
	}
	if err != nil {
		return res, opError(ctx, op, err)
	}
	// Read once the row is locked: a skip that committed while this one
	// waited for the lock wrote its row after the locking statement's
	// snapshot was taken.
	if err := tx.QueryRow(ctx, `SELECT `+skippedSQL+` FROM queue q WHERE q.id = $1`, p.ID).Scan(&d.Skipped); err != nil {
		return res, opError(ctx, op, err)
	}
	c, err := p.Judge(d)
	if err != nil || c.Result.Already {
		return c.Result, err
	}
	if _, err := tx.Exec(ctx, `WITH u AS (
    UPDATE queue SET order_key = $2, last_error = $3, updated_at = now()
    WHERE id = $1 AND status = 'dead'
    RETURNING id, attempts, updated_at
)
INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
SELECT id, attempts, '`+hookbox.OperatorOwner+`', '`+hookbox.AttemptSkip+`', $3, updated_at, updated_at FROM u`,
		p.ID, c.OrderKey, c.LastError); err != nil {
		return c.Result, opError(ctx, op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return c.Result, opError(ctx, op, err)
	}
	return c.Result, nil
}

// skippedSQL holds for a queue row q that Skip ended: its death has a
// skip row (see hookbox.AttemptSkip), which only Skip writes.
const skippedSQL = `EXISTS (SELECT 1 FROM attempts a WHERE a.event_id = q.id
    AND a.attempt = q.attempts AND a.outcome = '` + hookbox.AttemptSkip + `' AND a.error = q.last_error)`

// KeyedUnfinished counts a queue name's unfinished deliveries with an
// order key; see hookbox.Ops. The conditions match queue_order's, so it
// reads the name's range of that index.
func (s *Store) KeyedUnfinished(ctx context.Context, name string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM queue
        WHERE source = $1 AND order_key IS NOT NULL AND `+keyHeld+` AND status <> 'dead'`, name).Scan(&n)
	if err != nil {
		return 0, opError(ctx, fmt.Sprintf("keyed deliveries of %q", name), err)
	}
	return n, nil
}

// KeyHead returns the first delivery of a queue that holds an order key;
// see hookbox.Ops. It is one seek in queue_order.
func (s *Store) KeyHead(ctx context.Context, name, key string) (int64, hookbox.Status, error) {
	var id int64
	var status string
	err := s.pool.QueryRow(ctx, `SELECT id, status FROM queue
        WHERE source = $1 AND order_key COLLATE "C" = $2 AND order_key IS NOT NULL AND `+keyHeld+`
        ORDER BY order_key COLLATE "C", id LIMIT 1`, name, key).Scan(&id, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", hookbox.ErrNotFound
	}
	if err != nil {
		return 0, "", opError(ctx, fmt.Sprintf("the head of key %q of %q", key, name), err)
	}
	return id, hookbox.Status(status), nil
}
