package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// PauseTarget pauses a queue name; see hookbox.Ops.
func (s *Store) PauseTarget(ctx context.Context, name, reason string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO paused_targets (name, paused_at, reason) VALUES (?, ?, ?)
            ON CONFLICT (name) DO NOTHING`, name, millis(time.Now()), reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: pause %q: %w", name, err)
	}
	return nil
}

// ResumeTarget lifts a pause; see hookbox.Ops.
func (s *Store) ResumeTarget(ctx context.Context, name string) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM paused_targets WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: resume %q: %w", name, err)
	}
	return n > 0, nil
}

// Paused lists the paused queue names; see hookbox.Queue.
func (s *Store) Paused(ctx context.Context) ([]hookbox.Pause, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT name, paused_at, reason FROM paused_targets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: paused: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Pause
	for rows.Next() {
		var p hookbox.Pause
		var at int64
		if err := rows.Scan(&p.Name, &at, &p.Reason); err != nil {
			return nil, fmt.Errorf("sqlite: paused: %w", err)
		}
		p.PausedAt = fromMillis(at)
		out = append(out, p)
	}
	return out, rows.Err()
}
