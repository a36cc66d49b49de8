package postgres

import (
	"context"
)

// heldKeys counts, for each queue name of $1, the order keys that a dead
// delivery holds (see hookbox.Ops.HeldKeys). It walks each name's
// distinct keys through queue_order, as a claim by key does (one seek per
// key), finds each key's head (one more seek, and its row for the
// status), and for a dead head looks for a delivery waiting behind it,
// from the head on in the key's range of the index: however many
// deliveries wait behind a key, it reads one of them.
const heldKeys = `WITH RECURSIVE k(source, key) AS (
    SELECT n.name, (SELECT order_key COLLATE "C" FROM queue
            WHERE source = n.name AND order_key IS NOT NULL AND ` + keyHeld + `
            ORDER BY order_key COLLATE "C" LIMIT 1)
    FROM (SELECT DISTINCT name FROM unnest($1::text[]) AS u(name)) n
    UNION ALL
    SELECT k.source, (SELECT order_key COLLATE "C" FROM queue
            WHERE source = k.source AND order_key COLLATE "C" > k.key AND order_key IS NOT NULL AND ` + keyHeld + `
            ORDER BY order_key COLLATE "C" LIMIT 1)
    FROM k WHERE k.key IS NOT NULL
)
SELECT k.source, count(*) FROM k
CROSS JOIN LATERAL (SELECT id FROM queue
    WHERE source = k.source AND order_key COLLATE "C" = k.key AND order_key IS NOT NULL AND ` + keyHeld + `
    ORDER BY order_key COLLATE "C", id LIMIT 1) f
JOIN queue h ON h.id = f.id
WHERE k.key IS NOT NULL AND h.status = 'dead'
  AND EXISTS (SELECT 1 FROM queue b
      WHERE b.source = k.source AND b.order_key COLLATE "C" = k.key AND b.order_key IS NOT NULL
        AND b.` + keyHeld + ` AND b.id > h.id AND b.status IN ('pending', 'processing'))
GROUP BY k.source`

// HeldKeys counts, per queue name, the order keys a dead delivery holds;
// see hookbox.Ops. One statement walks queue_order for every name.
func (s *Store) HeldKeys(ctx context.Context, names []string) (map[string]int, error) {
	out := make(map[string]int, len(names))
	for _, name := range names {
		out[name] = 0
	}
	if len(names) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, heldKeys, names)
	if err != nil {
		return nil, opError(ctx, "keys held by dead deliveries", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, opError(ctx, "keys held by dead deliveries", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "keys held by dead deliveries", err)
	}
	return out, nil
}
