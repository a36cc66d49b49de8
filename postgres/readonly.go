package postgres

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox/internal/lograte"
)

// codeReadOnlySQLTransaction (read_only_sql_transaction) is the server's
// refusal of a write in a read-only transaction: a session whose
// default_transaction_read_only is on, or any session of a standby
// (recovery refuses LISTEN with it too).
const codeReadOnlySQLTransaction = "25006"

// readOnlyGuard closes every connection the server refuses a write on
// with SQLSTATE 25006, whatever the statement (an ingest, a claim, a
// finish, a lease extension, a handler's, the listener's) and whichever
// way it was sent (pgx, or database/sql over the pool): a session keeps
// the read-only default it started with, so once the database is writable
// again (a failover has promoted a new primary, ALTER DATABASE … SET
// default_transaction_read_only was undone) such a connection would refuse
// every write it was handed until it aged out of the pool. Closed, it is
// replaced by a new session, which is read-only only while the database
// still is. The pool drops a closed connection when it is released.
//
// It works at the protocol level (pgconn's OnPgError) rather than where
// the store maps errors, so no query path can be missed.
type readOnlyGuard struct {
	log   *slog.Logger
	lines lograte.Limiter // one line a minute: the refusals come per statement
}

// install makes cfg's connections close on a 25006, keeping cfg's other
// reactions to errors (pgconn closes a connection on a FATAL error).
func (g *readOnlyGuard) install(cfg *pgconn.Config) {
	next := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == codeReadOnlySQLTransaction {
			g.lines.Log(context.Background(), g.log, slog.LevelWarn, "read-only",
				"postgres: the database is read-only (a failover to a standby? default_transaction_read_only?): "+
					"deliveries are answered 503 and claims fail until it is writable again; "+
					"point the URL at the primary, or make the database writable; "+
					"each connection refused a write is closed and reopened",
				func() []slog.Attr {
					return []slog.Attr{slog.String("sqlstate", e.Code), slog.String("err", e.Message)}
				})
			return false // close the connection
		}
		return next == nil || next(c, e)
	}
}
