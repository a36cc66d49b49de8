package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
)

// codeProtocolViolation is PgBouncer's refusal of a transaction in its
// statement pooling mode.
const codeProtocolViolation = "08P01"

// ErrSharedSessions is what Open returns when the URL reaches PostgreSQL
// through a connection pooler that hands one server session to several
// clients in turn (PgBouncer's pool_mode = transaction or statement, and
// poolers like it).
var ErrSharedSessions = errors.New("postgres: the database URL goes through a connection pooler in transaction or statement " +
	"pooling mode (PgBouncer's pool_mode = transaction, say): hookbox needs a server session per connection " +
	"(its prepared statements, LISTEN, its session settings and the migration lock live in the session); " +
	"use the pooler's session mode (PgBouncer: pool_mode = session) or connect to the server directly")

// checkOwnSessions makes sure each connection to cfg keeps its server
// session: it returns ErrSharedSessions when the sessions are shared.
//
// Two connections of their own are opened. The first reads its server
// process (pg_backend_pid); the second reads its own, then again in a
// transaction it keeps open while the first reads once more. On a
// server, or behind a pooler in session mode, the first connection always
// has the same process and the second never has it. A pooler that shares
// sessions hands the first's process, idle between its statements, to the
// second (PgBouncer hands out the server connection used last), or
// another one to the first while the second holds it in its transaction;
// PgBouncer's statement mode refuses the transaction (08P01). The
// statements are not prepared (an unnamed statement each), so that on a
// shared session they do not first fail on prepared statements another
// client left there; nor do they use the simple protocol, which pgx
// refuses on a server whose standard_conforming_strings is off.
func checkOwnSessions(ctx context.Context, cfg *pgx.ConnConfig) error {
	a, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return connectError(err)
	}
	defer a.Close(context.Background())
	b, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return connectError(err)
	}
	defer b.Close(context.Background())
	pid := func(c *pgx.Conn) (int32, error) {
		var p int32
		err := c.QueryRow(ctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeExec).Scan(&p)
		return p, err
	}
	unavailable := func(err error) error {
		return fmt.Errorf("postgres: check the sessions: %w: %v", hookbox.ErrUnavailable, err)
	}
	for range 3 {
		first, err := pid(a)
		if err != nil {
			return unavailable(err)
		}
		second, err := pid(b)
		if err != nil {
			return unavailable(err)
		}
		if second == first {
			return ErrSharedSessions
		}
		if _, err := b.Exec(ctx, `BEGIN`, pgx.QueryExecModeExec); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == codeProtocolViolation {
				return ErrSharedSessions // PgBouncer's statement mode refuses transactions
			}
			return unavailable(err)
		}
		held, err := pid(b)
		if err != nil {
			return unavailable(err)
		}
		again, err := pid(a)
		if err != nil {
			return unavailable(err)
		}
		if _, err := b.Exec(ctx, `ROLLBACK`, pgx.QueryExecModeExec); err != nil {
			return unavailable(err)
		}
		if held == first || again != first {
			return ErrSharedSessions
		}
	}
	return nil
}
