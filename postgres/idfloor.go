package postgres

import (
	"context"
	"fmt"

	"github.com/hookbox/hookbox"
)

// RaiseIDFloor moves the events' id sequence past p's floor; see
// hookbox.Ops. The ids known are the sequence's (a restored dump sets it
// to its value at the dump, past ids that duplicates used up) and, should
// the sequence be behind the table (rows copied in by hand), the largest
// stored id. setval is not transactional: an id drawn meanwhile by an
// instance still running is below the floor, and the sequence is only
// ever moved forward (the update holds when the floor is past the
// sequence's value at that moment).
func (s *Store) RaiseIDFloor(ctx context.Context, p hookbox.IDFloorParams) (hookbox.IDFloor, error) {
	var res hookbox.IDFloor
	err := s.pool.QueryRow(ctx, `SELECT greatest(
            (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_id_seq),
            (SELECT coalesce(max(id), 0) FROM event_data))`).Scan(&res.Known)
	if err != nil {
		return res, opError(ctx, "raise the id floor", err)
	}
	floor, err := p.Target(res.Known)
	if err != nil {
		return res, fmt.Errorf("postgres: raise the id floor: %w", err)
	}
	if floor <= res.Known {
		res.Floor = res.Known
		return res, nil
	}
	// An instance still running may have drawn ids past the floor since
	// it was read: the sequence is then left where it is, past it. A
	// sequence never drawn from (is_called false) hands out last_value
	// itself next, so one standing at the floor is moved too.
	_, err = s.pool.Exec(ctx, `SELECT setval('events_id_seq', $1::bigint, true)
        FROM events_id_seq WHERE last_value < $1::bigint OR (last_value = $1::bigint AND NOT is_called)`, floor)
	if err != nil {
		return res, opError(ctx, "raise the id floor", err)
	}
	res.Floor, res.Moved = floor, true
	return res, nil
}
