package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

// Marks (hookbox.Mark) are rows of work_marks, written on a connection of
// their own while the work transaction that picked the events holds their
// row locks, and emptied inside that transaction, so they are gone exactly
// when its outcomes are committed.

// markUpsert records a mark; it commits without waiting for the WAL flush
// (a mark only has to outlive hookbox's process, not the server's).
const markUpsert = `INSERT INTO work_marks (key, worker, ids, attempts) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET worker = excluded.worker, ids = excluded.ids, attempts = excluded.attempts`

// markTimeout bounds writing a mark.
const markTimeout = 2 * time.Second

// Mark records m in one round trip; see hookbox.WorkTx.
func (w *workTx) Mark(ctx context.Context, m hookbox.Mark) error {
	ids := make([]int64, len(m.Events))
	attempts := make([]int32, len(m.Events))
	for i, ev := range m.Events {
		ids[i], attempts[i] = ev.ID, int32(ev.Attempts)
	}
	// Bounded: a server that stopped answering must fail the claim, not
	// hold a pool connection while ingest waits for one.
	ctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(asyncCommit)
	b.Queue(markUpsert, m.Key, m.Worker, ids, attempts)
	b.Queue(`COMMIT`)
	if err := w.s.pool.Pool.SendBatch(ctx, b).Close(); err != nil {
		return unavailable(ctx, "mark", err)
	}
	w.marked = m.Key
	return nil
}

// clearMark empties the mark inside the work transaction, so it is gone
// with the commit of the outcomes and kept if they roll back.
const clearMark = `UPDATE work_marks SET ids = '{}', attempts = '{}' WHERE key = $1`

// DropMark forgets the mark key; see hookbox.Queue.
func (s *Store) DropMark(ctx context.Context, key string) error {
	if _, err := s.pool.Pool.Exec(ctx, `DELETE FROM work_marks WHERE key = $1`, key); err != nil {
		return unavailable(ctx, "drop mark", err)
	}
	return nil
}

// orphanMarks lists the marks whose pool has no record.
const orphanMarks = `SELECT m.key, m.worker, m.ids, m.attempts FROM work_marks m
WHERE NOT EXISTS (SELECT 1 FROM workers w WHERE w.name = m.worker) ORDER BY m.key`

// stillAsPicked reads the events of a mark that are unfinished and still
// have the attempt count they were picked with, without their payloads
// (see hookbox.Queue.OrphanMarks), as scanListedEvent reads them.
const stillAsPicked = `SELECT ` + eventColumns + `, NULL::bytea, payload IS NULL FROM events
WHERE (id, attempts) IN (SELECT * FROM unnest($1::bigint[], $2::integer[]))
  AND status IN ('pending', 'processing')
ORDER BY id`

// OrphanMarks reads the marks whose pool has no record; see hookbox.Queue.
func (s *Store) OrphanMarks(ctx context.Context) ([]hookbox.Mark, error) {
	type row struct {
		m        hookbox.Mark
		ids      []int64
		attempts []int32
	}
	rows, err := s.pool.Pool.Query(ctx, orphanMarks)
	if err != nil {
		return nil, unavailable(ctx, "marks", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.m.Key, &x.m.Worker, &x.ids, &x.attempts)
		return x, err
	})
	if err != nil {
		return nil, unavailable(ctx, "marks", err)
	}
	out := make([]hookbox.Mark, 0, len(found))
	for _, x := range found {
		if len(x.ids) > 0 {
			rows, err := s.pool.Pool.Query(ctx, stillAsPicked, x.ids, x.attempts)
			if err != nil {
				return nil, unavailable(ctx, "marks", err)
			}
			if x.m.Events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (hookbox.Event, error) { return scanListedEvent(r) }); err != nil {
				return nil, unavailable(ctx, "marks", err)
			}
		}
		out = append(out, x.m)
	}
	return out, nil
}
