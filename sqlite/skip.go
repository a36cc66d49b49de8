package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// Skip ends one dead delivery for good; see hookbox.Ops. It reads the
// row (its attempts among it, for p.Expect), has hookbox.SkipParams.Judge
// decide, and changes the row in the same write transaction, guarded by
// its status: no attempt can start or end between the read and the write.
func (s *Store) Skip(ctx context.Context, p hookbox.SkipParams) (hookbox.SkipResult, error) {
	c := hookbox.SkipChange{Result: hookbox.SkipResult{ID: p.ID}}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var d hookbox.SkipCandidate
		err := tx.QueryRowContext(ctx, `SELECT status, delivery_id, order_key, attempts, fanout, `+skippedSQL+` FROM events WHERE id = ?`,
			p.ID).Scan(&d.Status, &d.DeliveryID, &d.OrderKey, &d.Attempts, &d.FanOut, &d.Skipped)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("event %d: %w", p.ID, hookbox.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if c, err = p.Judge(d); err != nil || c.Result.Already {
			return err
		}
		now := millis(time.Now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (event_id, attempt, owner, outcome, error, started_at, finished_at)
            SELECT id, attempts, '`+hookbox.OperatorOwner+`', '`+hookbox.AttemptSkip+`', ?, ?, ? FROM events WHERE id = ?`,
			c.LastError, now, now, p.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE events SET order_key = ?, last_error = ?, updated_at = ?
            WHERE id = ? AND status = 'dead'`, c.OrderKey, c.LastError, now, p.ID)
		return err
	})
	if err != nil {
		var ns *hookbox.NotSkippableError
		if errors.As(err, &ns) || errors.Is(err, hookbox.ErrNotFound) {
			return c.Result, err
		}
		return c.Result, fmt.Errorf("sqlite: skip %d: %w", p.ID, err)
	}
	return c.Result, nil
}

// skippedSQL holds for an events row that Skip ended: its death has a
// skip row (see hookbox.AttemptSkip), which only Skip writes.
const skippedSQL = `EXISTS (SELECT 1 FROM attempts a WHERE a.event_id = events.id
    AND a.attempt = events.attempts AND a.outcome = '` + hookbox.AttemptSkip + `' AND a.error IS events.last_error)`

// KeyedUnfinished counts a queue name's unfinished deliveries with an
// order key; see hookbox.Ops. It reads the name's range of events_order.
func (s *Store) KeyedUnfinished(ctx context.Context, name string) (int, error) {
	var n int
	err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM events INDEXED BY events_order
        WHERE source = ? AND order_key IS NOT NULL AND `+keyHeld+` AND status <> 'dead'`, name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: keyed deliveries of %q: %w", name, err)
	}
	return n, nil
}

// KeyHead returns the first delivery of a queue that holds an order key;
// see hookbox.Ops. It is one seek in events_order.
func (s *Store) KeyHead(ctx context.Context, name, key string) (int64, hookbox.Status, error) {
	var id int64
	var status string
	err := s.reader.QueryRowContext(ctx, `SELECT id, status FROM events INDEXED BY events_order
        WHERE source = ? AND order_key = ? AND order_key IS NOT NULL AND `+keyHeld+`
        ORDER BY id LIMIT 1`, name, key).Scan(&id, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", hookbox.ErrNotFound
	}
	if err != nil {
		return 0, "", fmt.Errorf("sqlite: the head of key %q of %q: %w", key, name, err)
	}
	return id, hookbox.Status(status), nil
}
