package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/service"
)

// defaultDBTimeout is how long one PostgreSQL statement of a command other
// than serve may wait (for a lock, or for the server's answer) unless
// --db-timeout or HOOKBOX_DB_TIMEOUT says otherwise.
const defaultDBTimeout = 30 * time.Second

// dbTimeoutEnv is the variable --db-timeout defaults to.
const dbTimeoutEnv = "HOOKBOX_DB_TIMEOUT"

// dbTimeoutUsage is --db-timeout's help.
const dbTimeoutUsage = "commands other than serve, on PostgreSQL: how long one statement may wait for a lock or for the server's answer before the command gives up (0: no limit); default $" +
	dbTimeoutEnv + ", then 30s"

// dbTimeoutValue is the --db-timeout in force: the flag, else
// HOOKBOX_DB_TIMEOUT, else defaultDBTimeout; 0 means none.
func (g *globalFlags) dbTimeoutValue() (time.Duration, error) {
	v, name := g.dbTimeout, "--db-timeout"
	if v == "" {
		v, name = os.Getenv(dbTimeoutEnv), dbTimeoutEnv
	}
	if v == "" {
		return defaultDBTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return 0, usagef("%s: want a duration such as 30s or 5m (0 for no limit)", name)
	}
	return d, nil
}

// cliStoreOptions are the options of a store a command other than serve
// opens: an existing database only, its PostgreSQL statements bounded by
// --db-timeout (serve's sessions have none: serve bounds each of its
// steps itself).
func cliStoreOptions(g *globalFlags) (service.StoreOptions, error) {
	d, err := g.dbTimeoutValue()
	if err != nil {
		return service.StoreOptions{}, err
	}
	g.dbTimeoutUsed = d
	return service.StoreOptions{Existing: true, Postgres: postgres.Options{StatementTimeout: d}}, nil
}

// explainDBErrors makes every command under root report its database
// errors with explainDBError.
func explainDBErrors(root *cobra.Command, g *globalFlags) {
	if run := root.RunE; run != nil {
		root.RunE = func(cmd *cobra.Command, args []string) error {
			return explainDBError(cmd.Context(), run(cmd, args), g.dbTimeoutUsed)
		}
	}
	for _, c := range root.Commands() {
		explainDBErrors(c, g)
	}
}

// explainDBError rewrites err, a command's error, when it is about the
// database in a way its text would not make plain: the command was
// interrupted (ctx ended: Ctrl-C or a signal) while the database worked,
// which the driver reports as a cancelled statement (SQLSTATE 57014) and
// the store as "store unavailable"; or a PostgreSQL statement ran into --db-timeout
// (timeout, 0 when unknown), which says it waited and for what.
func explainDBError(ctx context.Context, err error, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	lock, ok := postgres.TimedOut(err)
	if ctx.Err() != nil {
		if errors.Is(err, hookbox.ErrUnavailable) || ok && !lock {
			return &interruptedError{err: err, ctxErr: ctx.Err()}
		}
		return err
	}
	if !ok || timeout <= 0 {
		return err
	}
	return &dbTimeoutError{err: err, timeout: timeout, lock: lock}
}

// interruptedError is a command stopped by Ctrl-C or a signal while the
// database was working for it.
type interruptedError struct{ err, ctxErr error }

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted (%v) while waiting for the database", e.ctxErr)
}

func (e *interruptedError) Unwrap() []error { return []error{e.ctxErr, e.err} }

// dbTimeoutError is a PostgreSQL statement given up on at --db-timeout.
type dbTimeoutError struct {
	err     error
	timeout time.Duration
	lock    bool
}

func (e *dbTimeoutError) Error() string {
	return e.cause() + "; see pg_stat_activity (wait_event_type 'Lock') and pg_locks for who holds what, " +
		"then run the command again, or give it longer with --db-timeout or " + dbTimeoutEnv + e.sqlstate()
}

// cause says what timed out, and what may be the reason.
func (e *dbTimeoutError) cause() string {
	s := fmt.Sprintf("the database did not answer within %s (--db-timeout): ", e.timeout)
	var pgErr *pgconn.PgError
	switch {
	case e.lock:
		return s + "the command waited that long for a lock another session holds " +
			"(a migration, VACUUM FULL, LOCK TABLE, a long or forgotten transaction)"
	case errors.As(e.err, &pgErr):
		return s + "the server ended the statement at that limit; a lock may be held by another session " +
			"(a migration, VACUUM FULL, LOCK TABLE, a long or forgotten transaction), or the server is overloaded"
	}
	return s + "no reply from the server, or from a network or connection pooler between, " +
		"while the connection stayed open; check that the server answers (psql)"
}

// sqlstate is the server's own word, " (SQLSTATE …: …)", if it had one.
func (e *dbTimeoutError) sqlstate() string {
	var pgErr *pgconn.PgError
	if errors.As(e.err, &pgErr) {
		return fmt.Sprintf(" (SQLSTATE %s: %s)", pgErr.Code, pgErr.Message)
	}
	return ""
}

// lookError is the text of err, a failed look of tail, which looks again
// on its own: a timeout says only what timed out.
func lookError(ctx context.Context, err error, timeout time.Duration) string {
	var te *dbTimeoutError
	if err = explainDBError(ctx, err, timeout); errors.As(err, &te) {
		return te.cause() + te.sqlstate()
	}
	return err.Error()
}

func (e *dbTimeoutError) Unwrap() error { return e.err }
