package postgres

import (
	"context"
)

// heldKeys counts, for each queue name of $1, the order keys that a dead
// delivery holds (see hookbox.Ops.HeldKeys). It reads each name's dead
// deliveries with a key (queue_dead_keys), and for each looks in
// queue_order whether an earlier delivery holds its key (one seek, none
// read when it is the first) and whether one waits behind it (from the
// next entry on): its cost is the dead deliveries', however many keys or
// deliveries wait. Each key has one first delivery, so each held key is
// counted once.
const heldKeys = `SELECT d.source, count(*) FROM queue d
WHERE d.source = ANY ($1::text[]) AND d.order_key IS NOT NULL AND d.status = 'dead'
  AND NOT EXISTS (SELECT 1 FROM queue a
      WHERE a.source = d.source AND a.order_key COLLATE "C" = d.order_key COLLATE "C" AND a.order_key IS NOT NULL
        AND a.` + keyHeld + ` AND a.id < d.id)
  AND EXISTS (SELECT 1 FROM queue b
      WHERE b.source = d.source AND b.order_key COLLATE "C" = d.order_key COLLATE "C" AND b.order_key IS NOT NULL
        AND b.` + keyHeld + ` AND b.id > d.id AND b.status IN ('pending', 'processing'))
GROUP BY d.source`

// HeldKeys counts, per queue name, the order keys a dead delivery holds;
// see hookbox.Ops. One statement counts for every name.
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
