package sqlite

import (
	"context"
	"fmt"
)

// heldKeys counts the order keys of queue ?1 that a dead delivery holds
// (see hookbox.Ops.HeldKeys). It reads the queue's dead deliveries with a
// key that is not one of their own (events_dead_keys, whose predicate its
// own repeats: routing.NoKeyPrefix), and for each looks in events_order whether an
// earlier delivery holds its key (one seek, none read when it is the
// first) and whether one waits behind it (from the next entry on): its
// cost is the dead deliveries', however many keys or deliveries wait.
// Each key has one first delivery, so each held key is counted once.
const heldKeys = `SELECT count(*) FROM events d INDEXED BY events_dead_keys
        WHERE d.source = ?1 AND d.order_key IS NOT NULL AND d.status = 'dead' AND (d.order_key < '(none):' OR d.order_key >= '(none);')
          AND NOT EXISTS (SELECT 1 FROM events a INDEXED BY events_order
              WHERE a.source = ?1 AND a.order_key = d.order_key AND a.order_key IS NOT NULL AND a.` + keyHeld + `
                AND a.id < d.id)
          AND EXISTS (SELECT 1 FROM events b INDEXED BY events_order
              WHERE b.source = ?1 AND b.order_key = d.order_key AND b.order_key IS NOT NULL AND b.` + keyHeld + `
                AND b.id > d.id AND b.status IN ('pending', 'processing'))`

// HeldKeys counts, per queue name, the order keys a dead delivery holds;
// see hookbox.Ops. It runs one count per name, on a reader.
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
