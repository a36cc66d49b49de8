package postgres

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/slowcount"
)

// AcquireConn lends a test one of the store's own connections, with the
// statements hookbox prepared on it.
func (s *Store) AcquireConn(ctx context.Context) (*pgxpool.Conn, error) {
	return s.pool.Pool.Acquire(ctx)
}

// ConnSocketTimes reads TCP_USER_TIMEOUT and the keepalive interval from
// the socket of one of the store's connections.
func (s *Store) ConnSocketTimes(ctx context.Context) (user, interval time.Duration, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer c.Release()
	tc, ok := c.Conn().PgConn().Conn().(*net.TCPConn)
	if !ok {
		return 0, 0, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	return socketTimes(raw)
}

// IngestIdle is ingestIdle: the server's idle limit for an ingest
// transaction that may send maxBytes.
var IngestIdle = ingestIdle

// ConnLifetime is the pool's MaxConnLifetime and MaxConnLifetimeJitter.
func (s *Store) ConnLifetime() (lifetime, jitter time.Duration) {
	c := s.pool.Config()
	return c.MaxConnLifetime, c.MaxConnLifetimeJitter
}

// DueQueuesSQL is the statement behind DueQueues.
const DueQueuesSQL = dueQueues

// NotifySQL is notifySQL, the statement the notifier sends.
const NotifySQL = notifySQL

// HeldKeysSQL is the statement of Store.HeldKeys, for its plan.
const HeldKeysSQL = heldKeys

// ClearBatchSQL is the statement of one batch of Store.ClearPayloads,
// for its plan.
const ClearBatchSQL = clearBatch

// SetRefusedWait sets how long s waits for one of its pool's connections
// while the server refuses a new one (maxRefusedWait otherwise).
func (s *Store) SetRefusedWait(d time.Duration) { s.pool.wait = d }

// OverviewCountsSQL are the statements of Store.Overview's sources and
// counts, for their plans.
var OverviewCountsSQL = []string{overviewSources, overviewCounts}

// EventsQuery is the statement Store.Events runs for a filter, and its
// arguments, for its plan.
var EventsQuery = eventsQuery

// EventsQueryAllCandidates is EventsQuery with a status's candidates
// every row in it (statusCandidates), as it was before statusTop: the
// statement statusTop's are compared with.
func EventsQueryAllCandidates(f hookbox.Filter) (string, []any) { return eventsQueryBy(f, nil, false) }

// StatusOnly reports whether Store.Events reads f's page by statusTop.
var StatusOnly = statusOnly

// StatsFreshSQL is the statement of Store.Stats read at each call, for
// its plan.
var StatsFreshSQL = statsFresh

// DoneExactBelow is the count of done events from which Store.Stats
// keeps its count of them.
const DoneExactBelow = slowcount.ExactBelow

// EventsStatement is the statement Store.Events runs for a filter, and
// its arguments, after reading the filter's source scope; "" when
// nothing can match.
func (s *Store) EventsStatement(ctx context.Context, f hookbox.Filter) (string, []any, error) {
	return s.eventsStatement(ctx, f)
}

// SourceFewRows is the row count below which a source is listed from
// all its rows.
const SourceFewRows = sourceFewRows

// StatusSummarySQL is the status an operator reads of a row of the
// events view.
const StatusSummarySQL = statusSummary

// StatusWindow is the rows statusTop reads for each row of a page.
const StatusWindow = statusWindow

// MigrationPools counts the pools Open opened to apply migrations.
func MigrationPools() int64 { return migrationPools.Load() }

// SourceWalkIDs is how far down the ids the listing of a source with
// many rows walks before it reads the rest of its page from the
// (source, delivery_id) index.
const SourceWalkIDs = sourceWalkIDs

// WaitingAcquire is the store's Acquire (waitingPool.Acquire, which waits
// up to wait while the server refuses a new connection) on pool, a pool
// a test made with hooks of its own.
func WaitingAcquire(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) (*pgxpool.Conn, error) {
	p := &waitingPool{Pool: pool, log: slog.New(slog.DiscardHandler), wait: wait}
	return p.Acquire(ctx)
}
