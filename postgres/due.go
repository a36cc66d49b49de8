package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// dueQueues walks queue_due from one queue name to the next (one seek
// each: the first entry of a name is its earliest due time) and keeps the
// names whose earliest entry is due on the server's clock. Finished rows
// are not in the index, so the walk's cost is the number of queues with
// unfinished events, however many events or finished rows there are.
const dueQueues = `WITH RECURSIVE w(name, due) AS (
        (SELECT source, next_attempt_at FROM queue
         WHERE status IN ('pending', 'processing') ORDER BY source, next_attempt_at LIMIT 1)
        UNION ALL
        SELECT n.source, n.next_attempt_at FROM w CROSS JOIN LATERAL (
            SELECT source, next_attempt_at FROM queue
            WHERE status IN ('pending', 'processing') AND source > w.name
            ORDER BY source, next_attempt_at LIMIT 1) n)
    SELECT name FROM w WHERE due <= now()`

// DueQueues lists the queues with an event due now, in byte order (the
// walk's is the database collation's); see hookbox.Queue.
func (s *Store) DueQueues(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Pool.Query(ctx, dueQueues)
	if err != nil {
		return nil, unavailable(ctx, "due queues", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, unavailable(ctx, "due queues", err)
	}
	slices.Sort(out)
	return out, nil
}
