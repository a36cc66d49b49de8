package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE of a statement the server cancelled: at statement_timeout, or
// at a cancel request (an interrupted client).
const codeQueryCanceled = "57014"

// answerGrace is how long after Options.StatementTimeout the client gives
// up on a statement the server has not answered: the server ends it at
// the timeout and says so, unless the server, or the network or pooler
// between, has stopped answering.
const answerGrace = 5 * time.Second

// timeoutSettings is the statement that sets the session's timeouts
// opts asks for, or "".
func timeoutSettings(opts Options) string {
	q := ""
	if opts.StatementTimeout > 0 {
		q += fmt.Sprintf("; SET statement_timeout = %d", opts.StatementTimeout.Milliseconds())
	}
	if lock := opts.lockTimeout(); lock > 0 {
		q += fmt.Sprintf("; SET lock_timeout = %d", lock.Milliseconds())
	}
	return q
}

// lockTimeout is the session's lock_timeout: LockTimeout, else a tenth
// less than StatementTimeout, so that a statement that waits for a lock
// all along fails on the lock, with the SQLSTATE that names the cause
// (55P03), not on statement_timeout (57014).
func (o Options) lockTimeout() time.Duration {
	if o.LockTimeout > 0 {
		return o.LockTimeout
	}
	return o.StatementTimeout - o.StatementTimeout/10
}

// SQLSTATEs of a SET that setClientCheck lets pass: a parameter the
// server does not know (before PostgreSQL 14, client_connection_check_interval),
// and a value the parameter refuses (a nonzero one, where the server's
// platform cannot tell that a client left).
const (
	codeUndefinedObject       = "42704"
	codeInvalidParameterValue = "22023"
)

// setClientCheck sets the session's client_connection_check_interval to
// d (Options.ClientCheckInterval) when positive. It is a statement of its
// own, after the session's settings, and not a startup parameter: a
// server before PostgreSQL 14 refuses a connection whose startup names a
// parameter it does not know, and one statement of several that fails
// undoes the others. A server that does not know the parameter, or
// cannot check on its platform, keeps the old behaviour: a session whose
// client vanished runs its statement to the end.
func setClientCheck(ctx context.Context, c *pgx.Conn, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := c.Exec(ctx, fmt.Sprintf("SET client_connection_check_interval = %d", max(d.Milliseconds(), 1)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == codeUndefinedObject || pgErr.Code == codeInvalidParameterValue) {
		return nil
	}
	return err
}

// answerBound is a pgx query tracer that gives each statement (and the
// reading of its rows) a deadline d: past it, the context watcher asks
// the server to cancel the statement and, cancelDeadlineDelay later,
// closes the connection, so a statement on a stalled connection fails
// instead of waiting forever.
type answerBound struct{ d time.Duration }

type answerCancelKey struct{}

// TraceQueryStart gives the statement its deadline.
func (b answerBound) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	return context.WithValue(ctx, answerCancelKey{}, cancel)
}

// TraceQueryEnd releases the deadline's timer.
func (b answerBound) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if cancel, ok := ctx.Value(answerCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TimedOut reports whether err is a statement given up on for the
// timeouts of Options: lock is true when it waited for a lock longer than
// lock_timeout (SQLSTATE 55P03), which another session holds; false when
// the server cancelled it (57014: at statement_timeout, or at a cancel
// request, which an interrupted caller's context sends too: the caller
// tells the two apart by its context), or when the server did not answer
// within its deadline (context.DeadlineExceeded, not while connecting,
// which the connect timeout bounds and reports as a connection failure).
func TimedOut(err error) (lock, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeLockNotAvailable:
			return true, true
		case codeQueryCanceled:
			return false, true
		}
		return false, false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false, false
	}
	return false, errors.Is(err, context.DeadlineExceeded)
}
