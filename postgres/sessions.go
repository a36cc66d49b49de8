package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

var _ hookbox.SessionStore = (*Store)(nil)

// startSession remembers a session and, in the same statement, forgets a
// few expired ones (skipping rows another login is forgetting). The
// sweep's now ($3) comes as fromNow and is judged on the database's clock
// (dbNow): judged by the host's own, a login at a host whose clock was
// ahead by more than a session's life forgot every host's live sessions,
// and so ended them at every process. A session's expiry is its host's
// stamp, as the cookie's is (each process judges a cookie's expiry by
// its own clock before it asks the store); the sweep only forgets it
// once it has passed by the database's clock.
var startSession = `WITH added AS (
    INSERT INTO sessions (id_sha256, expires_at) VALUES ($1, $2)
), expired AS (
    SELECT id_sha256 FROM sessions WHERE expires_at <= ` + dbNow("$3::bigint") + ` LIMIT $4 FOR UPDATE SKIP LOCKED
)
DELETE FROM sessions s USING expired WHERE s.id_sha256 = expired.id_sha256`

// StartSession remembers sess and forgets a few expired sessions; see
// hookbox.SessionStore. Sessions commit synchronously (the pool's
// default), like every write but the work transactions. The sweep judges
// on the database's clock (startSession).
func (s *Store) StartSession(ctx context.Context, sess hookbox.Session) error {
	if _, err := s.pool.Exec(ctx, startSession, hookbox.SessionKey(sess.ID), sess.Expires, fromNow(sess.Now), hookbox.SessionSweep); err != nil {
		return opError(ctx, "start session", err)
	}
	return nil
}

// SessionLive reads the session's row; see hookbox.SessionStore.
func (s *Store) SessionLive(ctx context.Context, id string, now time.Time) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id_sha256 = $1 AND expires_at > $2`,
		hookbox.SessionKey(id), now).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, unavailable(ctx, "session live", err)
	}
	return true, nil
}

// EndSession deletes the session's row; see hookbox.SessionStore.
func (s *Store) EndSession(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id_sha256 = $1`, hookbox.SessionKey(id)); err != nil {
		return unavailable(ctx, "end session", err)
	}
	return nil
}
