package hookbox

import (
	"context"
	"crypto/sha256"
	"time"
)

// Session is one login to the operator console (package ui): a random id,
// carried in the signed session cookie, and when the login ends by
// itself.
type Session struct {
	// ID is the session's random id. Stores keep its SHA-256, so whoever
	// reads the database learns no id a cookie carries.
	ID string
	// Expires is when the session ends by itself.
	Expires time.Time
	// Now is when it starts: sessions that expired before it may be
	// forgotten.
	Now time.Time
}

// SessionStore remembers the operator console's live sessions in the
// database every process of a deployment shares, so that a session ended
// (logged out) at one process is refused at all of them, and after a
// restart. It keeps the live sessions rather than the ended ones: a
// session is admitted only while the store holds it, so a row lost (a
// restore from an older backup, a purge) ends a session instead of
// bringing an ended one back, and a store that cannot answer admits no
// one.
type SessionStore interface {
	// StartSession remembers s until s.Expires, and forgets a few
	// sessions that expired before s.Now, so the store holds about the
	// live ones. A store on a server with a clock of its own
	// (PostgreSQL) judges that on the server's clock, s.Now taken as the
	// caller's now, so a caller whose clock is ahead forgets no session
	// that is live for the others.
	StartSession(ctx context.Context, s Session) error
	// SessionLive reports whether the session with this id is
	// remembered and unexpired at now. An error means the store could not
	// tell; the caller must not admit the session then.
	SessionLive(ctx context.Context, id string, now time.Time) (bool, error)
	// EndSession forgets the session with this id, so that SessionLive
	// reports it ended from then on, at every process; ending a session
	// that is not remembered is no error. It returns once that is
	// durable.
	EndSession(ctx context.Context, id string) error
}

// SessionKey is what stores index a session by: the SHA-256 of its id.
func SessionKey(id string) []byte {
	k := sha256.Sum256([]byte(id))
	return k[:]
}

// SessionSweep is how many expired sessions a StartSession forgets at
// most: more than the one it adds, so that forgetting keeps ahead.
const SessionSweep = 8
