package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/lograte"
)

// waitingPool is the store's pgxpool.Pool, each of whose statements,
// transactions and acquires waits while the server refuses the pool a
// new connection (whileRefused). Embedded, the pool's other methods are
// its own.
//
// The workers' statements (claims, finishes, marks, BeginWork) use the
// pool itself (waitingPool.Pool) and fail at the first refusal: waiting,
// they kept every connection the server allowed busy, and ingest, though
// it waited too, answered 503 (TestPostgresPoolLargerThanServerAllows).
// The worker takes fewer connections for a while instead (see its
// runTx).
type waitingPool struct {
	*pgxpool.Pool
	log *slog.Logger
	// lines spaces out the warnings of whileRefused.
	lines lograte.Limiter
	// wait is how long whileRefused waits (maxRefusedWait; tests set it).
	wait time.Duration
}

// whileRefused runs try and, while it fails because the server refuses
// the pool a new connection (SQLSTATE 53300: a pool_max_conns larger
// than what max_connections or a connection limit leaves hookbox) and
// the pool holds connections of its own, in use or idle, runs it again,
// pausing between tries, until it has waited maxRefusedWait or ctx ends;
// it then returns the refusal. One of the pool's own connections is back
// within milliseconds (a claim, a finish, a handlers' transaction),
// where failing at the first refusal turned deliveries away (ingest),
// failed claims and handlers' transactions while the workers drained a
// backlog, and failed every other statement (a console page, /readyz)
// while they kept the pool's connections busy. An idle one was given
// back while try's new connection was refused (the pool connects for an
// acquire that found none idle, and hands it no connection given back
// meanwhile): the next try takes it. With none in use and none idle,
// none is coming back: the refusal is returned at once.
//
// try must have done nothing when the server refused it: the refusal
// comes when the pool connects, before any statement is sent. The
// first refusal of a wait is logged as a warning, one a minute.
func (p *waitingPool) whileRefused(ctx context.Context, try func() error) error {
	pause := time.Millisecond
	var deadline time.Time
	for {
		err := try()
		if err == nil || !tooManyConnections(err) || !p.holdsConns() {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(p.wait)
			p.lines.Log(ctx, p.log, slog.LevelWarn, "refused",
				fmt.Sprintf("postgres: the server refuses the pool a new connection (SQLSTATE 53300: max_connections, "+
					"or the role's or the database's CONNECTION LIMIT, is reached): each statement waits up to %s for one of the pool's own; "+
					"set pool_max_conns within what the server leaves hookbox, or raise the limit", p.wait),
				func() []slog.Attr { return []slog.Attr{slog.Int("pool_max_conns", int(p.Config().MaxConns))} })
		}
		if !pauseRefused(ctx, &pause, deadline) {
			return err
		}
	}
}

// pauseRefused pauses before a refused connection is asked for again:
// for *pause, or until deadline if that comes first, and doubles *pause
// up to maxRefusedPause. It reports false, without pausing, once the
// deadline has passed, and false when ctx ends during the pause.
func pauseRefused(ctx context.Context, pause *time.Duration, deadline time.Time) bool {
	wait := min(*pause, time.Until(deadline))
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*pause = min(*pause*2, maxRefusedPause)
	return true
}

// holdsConns reports whether the pool holds connections of its own, in
// use or idle. Only those it is connecting are left out.
func (p *waitingPool) holdsConns() bool {
	st := p.Stat()
	return st.AcquiredConns()+st.IdleConns() > 0
}

// maxRefusedWait is the longest whileRefused waits for one of the pool's
// connections: ingest's bound on beginning a transaction
// (ingestBeginTimeout), and short next to a claim's.
const maxRefusedWait = time.Second

// maxRefusedPause is the longest whileRefused pauses before it asks the
// pool again for a connection the server refused.
const maxRefusedPause = 20 * time.Millisecond

// openRefusedWait is the longest each step of Open waits while the
// server refuses it a connection (whileRefusedAtOpen).
const openRefusedWait = 2 * time.Second

// whileRefusedAtOpen runs step, a step of Open (the check for a pooler,
// the schema's check and migrations), and runs it again while it fails
// because the server refuses a new connection (SQLSTATE 53300), pausing
// between tries, for up to openRefusedWait or until ctx ends; it then
// returns the refusal. Open's connections come and go: the pooler check's
// two are closed before the pool's first connects, and the migrations'
// pool is closed before the listener connects, but a closed connection's
// backend ends a moment after the client has gone, and counts against
// the role's or the database's CONNECTION LIMIT until it does (as do
// those of a hookbox that has just stopped). With a limit that leaves
// hookbox little more than it uses, such a refusal is over within
// milliseconds, and Open failed at it. A limit that other clients'
// connections fill is still refused, once the wait is over. Each step
// may be run again: a refused connection sent no statement, and the
// migrations are applied under their lock, each at most once.
func whileRefusedAtOpen(ctx context.Context, step func() error) error {
	deadline := time.Now().Add(openRefusedWait)
	pause := time.Millisecond
	for {
		err := step()
		if err == nil || !tooManyConnections(err) && !errors.Is(err, hookbox.ErrTooManyConnections) {
			return err
		}
		if !pauseRefused(ctx, &pause, deadline) {
			return err
		}
	}
}

// Acquire is pgxpool.Pool.Acquire, waiting while the server refuses a
// new connection.
func (p *waitingPool) Acquire(ctx context.Context) (c *pgxpool.Conn, err error) {
	err = p.whileRefused(ctx, func() error { c, err = p.Pool.Acquire(ctx); return err })
	return c, err
}

// Exec is pgxpool.Pool.Exec, waiting while the server refuses a new
// connection.
func (p *waitingPool) Exec(ctx context.Context, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = p.whileRefused(ctx, func() error { tag, err = p.Pool.Exec(ctx, sql, args...); return err })
	return tag, err
}

// Query is pgxpool.Pool.Query, waiting while the server refuses a new
// connection (its error then comes from Query, not from the rows).
func (p *waitingPool) Query(ctx context.Context, sql string, args ...any) (rows pgx.Rows, err error) {
	err = p.whileRefused(ctx, func() error { rows, err = p.Pool.Query(ctx, sql, args...); return err })
	return rows, err
}

// Begin is pgxpool.Pool.Begin, waiting while the server refuses a new
// connection.
func (p *waitingPool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is pgxpool.Pool.BeginTx, waiting while the server refuses a
// new connection.
func (p *waitingPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (tx pgx.Tx, err error) {
	err = p.whileRefused(ctx, func() error { tx, err = p.Pool.BeginTx(ctx, opts); return err })
	return tx, err
}

// QueryRow is pgxpool.Pool.QueryRow, waiting while the server refuses a
// new connection: it takes the connection first, and gives it back once
// the row is read.
func (p *waitingPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &connRow{row: c.QueryRow(ctx, sql, args...), c: c}
}

// connRow is a row read on a connection taken for it, given back by Scan.
type connRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *connRow) Scan(dest ...any) error {
	defer r.c.Release()
	return r.row.Scan(dest...)
}

// errRow is a row that could not be read: Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
