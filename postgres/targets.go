package postgres

import (
	"context"
	"fmt"

	"github.com/hookbox/hookbox"
)

// PauseTarget pauses a queue name; see hookbox.Ops.
func (s *Store) PauseTarget(ctx context.Context, name, reason string) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO paused_targets (name, reason) VALUES ($1, $2)
        ON CONFLICT (name) DO NOTHING`, name, reason); err != nil {
		return opError(ctx, fmt.Sprintf("pause %q", name), err)
	}
	return nil
}

// ResumeTarget lifts a pause; see hookbox.Ops.
func (s *Store) ResumeTarget(ctx context.Context, name string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM paused_targets WHERE name = $1`, name)
	if err != nil {
		return false, opError(ctx, fmt.Sprintf("resume %q", name), err)
	}
	return tag.RowsAffected() > 0, nil
}

// Paused lists the paused queue names; see hookbox.Queue.
func (s *Store) Paused(ctx context.Context) ([]hookbox.Pause, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, paused_at, reason FROM paused_targets ORDER BY name`)
	if err != nil {
		return nil, opError(ctx, "paused", err)
	}
	defer rows.Close()
	var out []hookbox.Pause
	for rows.Next() {
		var p hookbox.Pause
		if err := rows.Scan(&p.Name, &p.PausedAt, &p.Reason); err != nil {
			return nil, opError(ctx, "paused", err)
		}
		p.PausedAt = p.PausedAt.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
