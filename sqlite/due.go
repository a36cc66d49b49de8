package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// dueQueues walks events_due from one queue name to the next (one seek
// each: the first entry of a name is its earliest due time), then keeps
// the names whose earliest entry is due at ?1. Finished rows are not in
// the index, so the walk's cost is the number of queues with unfinished
// events, however many events or finished rows there are.
const dueQueues = `WITH RECURSIVE w(name) AS (
        SELECT (SELECT source FROM events INDEXED BY events_due
                WHERE status IN ('pending', 'processing') ORDER BY source LIMIT 1)
        UNION ALL
        SELECT (SELECT source FROM events INDEXED BY events_due
                WHERE status IN ('pending', 'processing') AND source > w.name ORDER BY source LIMIT 1)
        FROM w WHERE w.name IS NOT NULL)
    SELECT name FROM w
    WHERE name IS NOT NULL AND EXISTS (SELECT 1 FROM events INDEXED BY events_due
        WHERE source = w.name AND status IN ('pending', 'processing') AND next_attempt_at <= ?1)`

// DueQueues lists the queues with an event due now, on a reader; see
// hookbox.Queue.
func (s *Store) DueQueues(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, dueQueues, millis(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("sqlite: due queues: %w: %w", hookbox.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("sqlite: due queues: %w: %w", hookbox.ErrUnavailable, err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: due queues: %w: %w", hookbox.ErrUnavailable, err)
	}
	return out, nil
}
