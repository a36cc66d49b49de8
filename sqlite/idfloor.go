package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// RaiseIDFloor moves event ids past p's floor; see hookbox.Ops.
//
// events.id is an INTEGER PRIMARY KEY without AUTOINCREMENT: SQLite gives
// a new row the largest id in the table plus one, and keeps no counter
// anywhere else. So the floor is a row: a placeholder event holding the
// floor plus one, which the next row then follows. It is a finished
// fan-out event of IDFloorSource with no deliveries, so nothing works it,
// Stats does not count it and lists read it as stored; Purge keeps it
// while it is the newest row (see keepsNewest). The first ingest that
// stores an event above it deletes it in the same transaction (see
// ingestTx.Commit), so it shows in lists only until the next delivery.
// The alternatives cost ingest: AUTOINCREMENT writes sqlite_sequence at
// every insert (and means rebuilding the table), and an id chosen by the
// insert from a floor kept elsewhere is a read per insert.
func (s *Store) RaiseIDFloor(ctx context.Context, p hookbox.IDFloorParams) (hookbox.IDFloor, error) {
	var res hookbox.IDFloor
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = hookbox.IDFloor{}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&res.Known); err != nil {
			return err
		}
		floor, err := p.Target(res.Known)
		if err != nil {
			return err
		}
		if floor <= res.Known {
			res.Floor = res.Known
			return nil
		}
		// An earlier placeholder goes: the new one is above it.
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE source = ?`, hookbox.IDFloorSource); err != nil {
			return err
		}
		now := millis(time.Now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, source, delivery_id, event_type, headers, payload,
                status, next_attempt_at, created_at, updated_at, fanout)
            VALUES (?, ?, ?, ?, '{}', x'', 'done', ?, ?, ?, 1)`,
			floor+1, hookbox.IDFloorSource,
			fmt.Sprintf("ids up to %d were handed out before a restore", floor),
			"placeholder: keeps new ids above those; deleted when the next event is stored",
			now, now, now); err != nil {
			return err
		}
		res.Floor, res.Moved = floor, true
		return nil
	})
	if err != nil {
		return hookbox.IDFloor{}, fmt.Errorf("sqlite: raise the id floor: %w", err)
	}
	if res.Moved {
		if err := s.settle(); err != nil {
			return hookbox.IDFloor{}, fmt.Errorf("sqlite: raise the id floor: %w", err)
		}
		s.idFloor.Store(true)
	}
	return res, nil
}

// dropIDFloorSQL deletes the placeholders of RaiseIDFloor that are no
// longer the newest row: an event stored since holds the floor now. It
// reads the (source, delivery_id) index.
const dropIDFloorSQL = `DELETE FROM events WHERE source = ?1 AND id < (SELECT max(id) FROM events)`

// loadIDFloor notes whether the database holds a placeholder of
// RaiseIDFloor, for ingest to delete once an event is stored above it.
func (s *Store) loadIDFloor(ctx context.Context) error {
	var n int
	err := s.writer.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE source = ?`, hookbox.IDFloorSource).Scan(&n)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	s.idFloor.Store(n > 0)
	return nil
}

// lookForIDFloor notes a placeholder of RaiseIDFloor that another process
// stored (hookbox restore-ids run while hookbox serves), so that this
// process's ingest deletes it too; loadIDFloor sees only those stored
// before Open. It is a seek in the (source, delivery_id) index, made by
// checkpointLoop every idFloorLookEvery ticks on the checkpointer's
// connection.
func (s *Store) lookForIDFloor() {
	if s.idFloor.Load() {
		return
	}
	var found bool
	err := s.checkpointer.QueryRow(`SELECT EXISTS (SELECT 1 FROM events WHERE source = ?)`, hookbox.IDFloorSource).Scan(&found)
	if err == nil && found {
		s.idFloor.Store(true)
	}
}

// idFloorLookEvery is how many of checkpointLoop's ticks (checkpointInterval)
// pass between two looks for a placeholder another process stored: 1 s.
const idFloorLookEvery = int(time.Second / checkpointInterval)
