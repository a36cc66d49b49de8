package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.SessionStore = (*Store)(nil)

// StartSession remembers s and forgets a few expired sessions, in one
// transaction on the writer connection; see hookbox.SessionStore.
func (s *Store) StartSession(ctx context.Context, sess hookbox.Session) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id_sha256, expires_at) VALUES (?, ?)`,
			hookbox.SessionKey(sess.ID), millis(sess.Expires)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE rowid IN
            (SELECT rowid FROM sessions WHERE expires_at <= ? LIMIT ?)`, millis(sess.Now), hookbox.SessionSweep)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: start session: %w", err)
	}
	return nil
}

// SessionLive reads the session's row on a reader connection; see
// hookbox.SessionStore.
func (s *Store) SessionLive(ctx context.Context, id string, now time.Time) (bool, error) {
	var one int
	err := s.reader.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id_sha256 = ? AND expires_at > ?`,
		hookbox.SessionKey(id), millis(now)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlite: session live: %w: %w", hookbox.ErrUnavailable, err)
	}
	return true, nil
}

// EndSession deletes the session's row; see hookbox.SessionStore.
func (s *Store) EndSession(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id_sha256 = ?`, hookbox.SessionKey(id))
		return err
	})
	if err == nil {
		// A logout is on disk when it returns, as the FULL promise says:
		// a power loss must not bring the session back.
		err = s.settle()
	}
	if err != nil {
		return fmt.Errorf("sqlite: end session: %w", err)
	}
	return nil
}
