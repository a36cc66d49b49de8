package sqlite

import (
	"context"
	"fmt"
)

// heldKeys counts the order keys of queue ?1 that a dead delivery holds
// (see hookbox.Ops.HeldKeys). It walks the queue's distinct keys through
// events_order, as a claim by key does (one seek per key), finds each
// key's head (one more seek, and its row for the status), and for a dead
// head looks for a delivery waiting behind it, from the head on in the
// key's range of the index: however many deliveries wait behind a key,
// it reads one of them.
const heldKeys = `WITH RECURSIVE k(key) AS (
            SELECT (SELECT order_key FROM events INDEXED BY events_order
                    WHERE source = ?1 AND order_key IS NOT NULL AND ` + keyHeld + `
                    ORDER BY order_key LIMIT 1)
            UNION ALL
            SELECT (SELECT order_key FROM events INDEXED BY events_order
                    WHERE source = ?1 AND order_key > k.key AND order_key IS NOT NULL AND ` + keyHeld + `
                    ORDER BY order_key LIMIT 1)
            FROM k WHERE k.key IS NOT NULL)
        SELECT count(*) FROM k JOIN events h ON h.id = (
            SELECT id FROM events INDEXED BY events_order
            WHERE source = ?1 AND order_key = k.key AND order_key IS NOT NULL AND ` + keyHeld + `
            ORDER BY id LIMIT 1)
        WHERE k.key IS NOT NULL AND h.status = 'dead'
          AND EXISTS (SELECT 1 FROM events b INDEXED BY events_order
              WHERE b.source = ?1 AND b.order_key = k.key AND b.order_key IS NOT NULL AND b.` + keyHeld + `
                AND b.id > h.id AND b.status IN ('pending', 'processing'))`

// HeldKeys counts, per queue name, the order keys a dead delivery holds;
// see hookbox.Ops. It runs one walk of events_order per name, on a
// reader.
func (s *Store) HeldKeys(ctx context.Context, names []string) (map[string]int, error) {
	out := make(map[string]int, len(names))
	for _, name := range names {
		if _, done := out[name]; done {
			continue
		}
		var n int
		if err := s.reader.QueryRowContext(ctx, heldKeys, name).Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite: keys held by dead deliveries of %q: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}
