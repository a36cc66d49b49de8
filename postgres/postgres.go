// Package postgres is the hookbox.Store for PostgreSQL, the path for
// deployments where several hookbox processes share one database.
//
// Guarantees:
//
//   - Ingest returns receipts only after the transaction that stored the new
//     rows has committed (the server acknowledged it), so a receipt may be
//     acknowledged to the sender.
//   - Deduplication is done by the UNIQUE (source, delivery_id) constraint
//     (and, for deliveries that set BodySHA256, a unique (source,
//     body_sha256) index) and INSERT … ON CONFLICT DO NOTHING, never by a
//     prior read: concurrent copies of one delivery, in this process or in
//     another, yield exactly one row and exactly one receipt that is not a
//     duplicate.
//   - A batch is stored with one multi-row INSERT over unnest arrays (and
//     one more for each round of repeats whose first copy does not decide
//     them, which is rare: see hookbox.InsertInOrder), with the rows and
//     receipts that storing its deliveries one at a time would give. Keys
//     are inserted in a fixed order, so overlapping batches cannot
//     deadlock. A transaction from BeginIngest takes several batches, so
//     two processes filling one each can still hold keys the other needs;
//     the transaction that gives up (a deadlock, or its short lock_timeout)
//     is redone within hookbox from the deliveries it keeps, and its
//     senders never see it.
//   - Ingest commits synchronously (synchronous_commit on, whatever the
//     server, role or URL say), so a receipt survives a server crash.
//   - Every transaction on the store's connections (ingest, claims,
//     finishes, the work transactions Go handlers run in, InTx) runs at
//     READ COMMITTED, whatever default_transaction_isolation the server,
//     database, role or URL set: at REPEATABLE READ or SERIALIZABLE the
//     queue's own statements would fail with serialization failures
//     whenever processes meet on a row.
//   - A delivery the server refuses (a data error) or that breaks the
//     store's limits is the delivery's fault: it alone gets an error
//     matching hookbox.ErrBadDelivery; the deliveries sharing its
//     transaction are stored.
//   - Each step of an ingest is bounded (about 1.5 s; connecting 2 s), so a
//     server that stops answering yields ErrUnavailable promptly.
//   - Payloads are stored as bytea, byte for byte.
//   - Every failure to reach the database or to commit is reported as an error
//     matching hookbox.ErrUnavailable, so the receiver answers 503 and the
//     sender retries. A missing event matches hookbox.ErrNotFound. Errors are
//     classified by SQLSTATE codes, never by message text.
//   - Open applies the embedded migrations under a PostgreSQL advisory lock, so
//     several processes starting at once migrate the schema exactly once.
//     It applies them through sessions of their own, opened only when
//     migrations are pending, on which (PostgreSQL 14 and later) the
//     server ends a session whose client is gone while its statement
//     runs or waits for a lock (MigrationClientCheck), so a process
//     killed while it migrates leaves no statement holding locks behind
//     it. The store's own sessions have no such check unless
//     Options.ClientCheckInterval asks for one.
//   - The store is a hookbox.Queue that several processes may drain at once:
//     claims take due rows with FOR NO KEY UPDATE SKIP LOCKED, so no two
//     claims take the same event; every transition is guarded by the lease
//     owner; Work holds the row locks of the events it runs until it
//     commits, so an event is never run by two processes at the same time
//     while its lease holds. Strict claims of one source are serialized
//     across processes by a transaction-scoped advisory lock.
//   - After Ingest has committed new rows, the store sends a NOTIFY that
//     Listen, in any process, turns into a worker wake-up.
//
// Each connection must keep its server session: behind a connection
// pooler that shares sessions between clients (PgBouncer in transaction
// or statement mode), Open fails with ErrSharedSessions.
//
// The connection URL is handed to pgx unchanged: pool settings such as
// pool_max_conns and server settings such as search_path=myschema work as
// query parameters. The schema named by search_path must exist.
package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/slowcount"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the schema's migrations, the files goose applies (a
// "-- +goose Up" and a "-- +goose Down" section each), for tools and tests
// that take a database to an earlier version.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded: it is there
	}
	return sub
}

// DefaultMaxConns is the pool size used when Options.MaxConns is zero and the
// URL sets no pool_max_conns.
const DefaultMaxConns = 16

// The store's connections probe an idle peer after keepAlive.Idle, every
// keepAlive.Interval, and carry TCP_USER_TIMEOUT (Linux) of
// tcpUserTimeout: the kernel closes a connection once what was sent on it
// has gone unacknowledged that long, or, when idle, once that long has
// passed since it last heard from the peer with a probe unanswered. On
// a working network an answer comes within milliseconds, however busy the
// server; tcpUserTimeout leaves room for nine probes, so a lost probe or
// two does not close a healthy connection (with Go's default interval of
// 15 s, one lost probe did, the timeout being counted from the last data
// received).
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 9}

const tcpUserTimeout = 60 * time.Second

// defaultConnectTimeout bounds a connection attempt when the URL sets no
// connect_timeout, so an unreachable server (or one behind a network that
// drops packets) turns into a prompt 503 instead of a request that hangs.
const defaultConnectTimeout = 2 * time.Second

// A pooled connection is closed after connLifetime plus up to
// connLifetimeJitter (pgxpool's default: an hour, all at once), unless the
// URL sets pool_max_conn_lifetime (or _jitter). A session keeps what it
// started with: the server it reached (after a failover through DNS or a
// proxy, an old primary that still answers), the settings of ALTER
// DATABASE or ALTER ROLE … SET, a read-only default. The store closes a
// connection that is refused a write (readOnlyGuard), but not every such
// change shows as an error; this bounds how long any of them lasts, for
// the price of a reconnection per connection every few minutes. The
// jitter spreads out the reconnections of connections opened together.
const (
	connLifetime       = 5 * time.Minute
	connLifetimeJitter = time.Minute
)

// urlSets reports whether the connection URL (or key=value string) sets
// the parameter key: pgxpool takes its pool_ parameters out of the parsed
// config, so only the URL tells an explicit value from a default.
func urlSets(url, key string) bool {
	for rest := url; ; {
		i := strings.Index(rest, key)
		if i < 0 {
			return false
		}
		rest = rest[i+len(key):]
		if after := strings.TrimLeft(rest, " "); strings.HasPrefix(after, "=") {
			return true
		}
	}
}

// Options tune the connection pool.
type Options struct {
	// MaxConns is the largest number of connections the pool opens. Zero
	// means the URL's pool_max_conns if it has one, else DefaultMaxConns.
	MaxConns int32
	// Existing opens an existing hookbox schema only: Open applies no
	// migrations and creates no table, and a schema without hookbox's
	// tables or with an older version than this hookbox needs is an error
	// matching hookbox.ErrNoSchema. For commands that only read or change
	// existing events, pointed perhaps at a database other apps share.
	// Either way, a schema migrated by a newer hookbox is refused with an
	// error matching ErrNoSchema.
	Existing bool
	// IngestBytes is the most payload bytes one ingest transaction may
	// send (hookbox serve: max_inflight_body_bytes, which bounds the
	// bodies in flight); the server's idle limit for ingest transactions
	// grows with it (see ingestIdle). Default DefaultIngestBytes.
	IngestBytes int64
	// IngestIdle, when positive, is the server's idle limit for ingest
	// transactions (idle_in_transaction_session_timeout) in place of the
	// one IngestBytes gives (10 s and more): how long a connection that
	// fell silent in an ingest transaction holds its deliveries' keys.
	// For tests that wait for that limit; hookbox serve leaves it unset.
	IngestIdle time.Duration
	// Logger receives the store's own lines (that the database is
	// read-only, say). Nil means slog.Default().
	Logger *slog.Logger
	// StatementTimeout, when positive, bounds each statement of the
	// store's sessions, for one-shot commands (hookbox's CLI; serve
	// bounds its steps itself and sets none): the server ends a
	// statement that runs longer (statement_timeout, SQLSTATE 57014) or
	// waits for a lock for most of it (lock_timeout, 55P03, a tenth
	// less, unless LockTimeout is set), and the client gives up on one
	// the server has not answered answerGrace after that (a stalled
	// server, network or pooler), as it does on a ping of an idle
	// connection. They set the session's own timeouts, over any the URL,
	// the role or the database sets. TimedOut recognizes the errors.
	StatementTimeout time.Duration
	// LockTimeout, when positive, is the sessions' lock_timeout (by
	// default a tenth less than StatementTimeout): for a migration, whose statements may
	// run long but must not wait long for locks held elsewhere, queuing
	// every other session's statements behind them.
	LockTimeout time.Duration
	// ClientCheckInterval, when positive, is the sessions'
	// client_connection_check_interval: while a statement runs or waits
	// for a lock, the server checks that often whether the client is
	// still there, and ends the session of one that is gone (a process
	// killed, whose host closed its connections) instead of running the
	// statement to its end with its locks held. The sessions Open applies
	// migrations through have it in any case (MigrationClientCheck, or
	// this when set), since their statements may wait for, then hold,
	// locks every other session queues behind; hookbox serve's own
	// sessions go without. PostgreSQL 14 added the setting; an older
	// server (or one on a platform where the server cannot check) goes
	// without, as before (see setClientCheck).
	ClientCheckInterval time.Duration
}

// DefaultIngestBytes is Options.IngestBytes's default: 64 MiB.
const DefaultIngestBytes = 64 << 20

// Store is a hookbox.Store kept in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *waitingPool
	db   *sql.DB // database/sql over pool, for the transactions handed to handlers

	notifier *notifier
	// beginIngestQ opens an ingest transaction (beginIngestQuery).
	beginIngestQ string
	// genericIngest: ingest transactions plan insertEvents generically
	// (genericPlans); false where the URL sets plan_cache_mode.
	genericIngest bool
	// log is Options.Logger: the store's own lines.
	log *slog.Logger
	// listenFailing is set while Listen cannot listen (see Listen).
	listenFailing atomic.Bool
	// closing ends when Close is called; it stops the listeners.
	closing    context.Context
	closeStore context.CancelFunc
	// done is Stats' last count of the done events (doneCount).
	done slowcount.Cache
}

var (
	_ hookbox.Store          = (*Store)(nil)
	_ hookbox.IngestBeginner = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string), applies pending migrations (unless opts.Existing)
// and returns the store.
// Errors never contain the password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, parseError(err)
	}
	if m, ok := map[pgx.QueryExecMode]string{pgx.QueryExecModeExec: "exec", pgx.QueryExecModeSimpleProtocol: "simple_protocol"}[cfg.ConnConfig.DefaultQueryExecMode]; ok {
		// These send parameters as text without asking the server their
		// types: the headers' []byte, meant as jsonb, went as bytea's
		// hex, and every delivery was refused as bad (400), none stored.
		// pgx suggests them behind a transaction pooler, which hookbox
		// refuses anyway (ErrSharedSessions).
		return nil, fmt.Errorf("postgres: the database URL's default_query_exec_mode=%s is not supported: hookbox's statements need the server's parameter types; "+
			"leave it out (the default, cache_statement), or use cache_describe or describe_exec", m)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case opts.MaxConns < 0:
		return nil, fmt.Errorf("postgres: MaxConns must not be negative, got %d", opts.MaxConns)
	case opts.StatementTimeout < 0 || opts.LockTimeout < 0 || opts.ClientCheckInterval < 0:
		return nil, errors.New("postgres: StatementTimeout, LockTimeout and ClientCheckInterval must not be negative")
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if !urlSets(url, "pool_max_conn_lifetime") {
		cfg.MaxConnLifetime = connLifetime
	}
	if !urlSets(url, "pool_max_conn_lifetime_jitter") {
		cfg.MaxConnLifetimeJitter = connLifetimeJitter
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// A connection refused a write because its session is read-only is
	// closed, so the store writes again as soon as the database does.
	(&readOnlyGuard{log: opts.Logger}).install(&cfg.ConnConfig.Config)
	// A connection the network drops without a word (a firewall that
	// forgot it) is closed by the kernel after tcpUserTimeout, instead of
	// after TCP's retries (about 15 minutes), whatever was waiting on it:
	// a handler's transaction, an Apply, the listener (see keepAlive). The
	// connect timeout still bounds connecting (pgconn applies it).
	dialer := &net.Dialer{KeepAliveConfig: keepAlive, Control: func(network, _ string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil // a Unix socket
		}
		return setUserTimeout(c, tcpUserTimeout)
	}}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	// Every session starts with synchronous commits, whatever the server,
	// the role or the URL say: ingest acknowledges what it commits. Work
	// transactions turn it off for themselves (SET LOCAL).
	//
	// No JIT compilation, unless the URL asks for it: hookbox's statements
	// are short index walks run many times, and once a prepared statement
	// turns generic on a large table its estimated cost passes
	// jit_above_cost, and compiling costs far more than it saves (a purge
	// batch of 1000 rows over 2M rows: 383 ms with JIT, 20 ms without).
	//
	// Statements are planned for the tables as they are when they run
	// (plan_cache_mode = force_custom_plan), unless the URL says otherwise.
	// A prepared statement otherwise turns generic after five runs and
	// keeps that plan until the table is next analyzed: the queue starts
	// empty, where a sequential scan is the cheapest plan for every
	// statement (claims and finishes alike), and a claim by order key
	// planned then took a minute per claim at 20,000 rows on a server
	// whose autovacuum was off (or had not run yet). Planning again costs
	// tens of microseconds per statement, and hookbox runs a statement per
	// batch, not per event. The one exception is ingest's INSERT, which
	// reads no table (see genericPlans).
	//
	// All three are set by a statement once connected, not as startup
	// parameters: a connection pooler such as PgBouncer refuses a startup
	// parameter it does not know (jit, synchronous_commit) unless told to
	// ignore it, and hookbox must connect through one as it is.
	settings := sessionSettings(cfg.ConnConfig.RuntimeParams) + timeoutSettings(opts)
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.Tracer = answerBound{opts.StatementTimeout + answerGrace}
		cfg.PingTimeout = opts.StatementTimeout + answerGrace
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, settings); err != nil {
			return err
		}
		return setClientCheck(ctx, c, opts.ClientCheckInterval)
	}
	// A cancelled context cancels the statement on the server instead of
	// closing the connection: a handler whose attempt times out in the
	// middle of a query fails alone, and the Work transaction it ran in goes
	// on with the other events, as on SQLite. Ingest steps close the
	// connection at once instead (closeOnCancel). Either way the
	// connection is not lent again once given back (keepUncancelled).
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &cancelHandler{conn: c}
	}
	cfg.AfterRelease = keepUncancelled
	// A pooler that shares server sessions between clients is refused
	// before anything is prepared, listened for or migrated through it.
	if err := whileRefusedAtOpen(ctx, func() error { return checkOwnSessions(ctx, cfg.ConnConfig) }); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(err)
	}
	if opts.IngestBytes <= 0 {
		opts.IngestBytes = DefaultIngestBytes
	}
	_, planned := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]
	s := &Store{pool: &waitingPool{Pool: pool, log: opts.Logger, wait: maxRefusedWait},
		db: stdlib.OpenDBFromPool(pool), log: opts.Logger, genericIngest: !planned,
		beginIngestQ: beginIngestQuery(cmp.Or(opts.IngestIdle, ingestIdle(opts.IngestBytes)), !planned)}
	if err := whileRefusedAtOpen(ctx, func() error { return s.openSchema(ctx, cfg, settings, opts) }); err != nil {
		s.db.Close()
		pool.Close()
		return nil, err
	}
	s.notifier = startNotifier(pool)
	s.closing, s.closeStore = context.WithCancel(context.Background())
	return s, nil
}

// sessionSettings is the statement that sets up each new session, given
// the startup parameters from the URL (a jit there is kept).
//
// Every transaction of the session runs at READ COMMITTED, whatever
// default_transaction_isolation the database, the role or the URL set:
// claims lock with SKIP LOCKED and guard each transition by its lease
// owner, which READ COMMITTED makes safe, while at REPEATABLE READ or
// SERIALIZABLE a claim, finish or replay meeting a row another process
// had just changed failed with a serialization failure (40001), and the
// predicate locks of SERIALIZABLE made the work transactions of several
// processes fail each other's commits. Go handlers run in hookbox's work
// transaction, so at READ COMMITTED too.
//
// The server probes an idle client after a minute, every 10 s, six times
// (unless the URL sets tcp_keepalives_idle): a backend whose client
// vanished without a word (a firewall that forgot the connection) is
// ended in about two minutes, not the two hours of the usual system
// default, and the rows its open transaction locked (a transaction of Go
// handlers, say) are free again. Ignored on a Unix socket.
func sessionSettings(params map[string]string) string {
	q := `SET synchronous_commit = on; SET default_transaction_isolation = 'read committed'`
	if _, ok := params["jit"]; !ok {
		q += `; SET jit = off`
	}
	if _, ok := params["plan_cache_mode"]; !ok {
		q += `; SET plan_cache_mode = force_custom_plan`
	}
	if _, ok := params["tcp_keepalives_idle"]; !ok {
		q += `; SET tcp_keepalives_idle = 60; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 6`
	}
	return q
}

// cancelDeadlineDelay is how long a statement whose context ended may take
// to be cancelled by the server before the connection is closed instead.
const cancelDeadlineDelay = 2 * time.Second

// closeOnCancelKey marks a context whose end should close the connection
// at once rather than ask the server to cancel the statement.
type closeOnCancelKey struct{}

// closeOnCancel returns ctx marked so that, when it ends during a
// statement, the connection is closed at once: the server may not be
// answering at all (a network that drops packets), and waiting for a
// cancel request to be answered would keep the caller for
// cancelDeadlineDelay more. Ingest steps use it; their transaction is
// abandoned anyway when they time out.
func closeOnCancel(ctx context.Context) context.Context {
	return context.WithValue(ctx, closeOnCancelKey{}, true)
}

// cancelHandler is the pool's context watcher: a cancel request with
// cancelDeadlineDelay as the fallback, or an immediate close for contexts
// marked by closeOnCancel.
type cancelHandler struct {
	conn *pgconn.PgConn
	cur  *pgconn.CancelRequestContextWatcherHandler
}

// HandleCancel reacts to the end of the watched context.
func (h *cancelHandler) HandleCancel(ctx context.Context) {
	delay := cancelDeadlineDelay
	if ctx.Value(closeOnCancelKey{}) != nil {
		delay = 0
	}
	h.cur = &pgconn.CancelRequestContextWatcherHandler{Conn: h.conn, DeadlineDelay: delay}
	h.cur.HandleCancel(ctx)
}

// HandleUnwatchAfterCancel finishes what HandleCancel started, and marks
// the connection as one a cancel request was sent for (see
// keepUncancelled).
func (h *cancelHandler) HandleUnwatchAfterCancel() {
	h.cur.HandleUnwatchAfterCancel()
	h.conn.CustomData()[cancelSentKey] = true
}

// cancelSentKey marks, in a connection's CustomData, one whose statement
// was interrupted by its context: a cancel request was sent for it.
const cancelSentKey = "hookbox.cancel-sent"

// keepUncancelled is the pool's AfterRelease: a connection a cancel
// request was sent for is closed when it is given back, not lent again.
//
// A cancel request travels on a connection of its own, and the server
// acts on it when the signal reaches the session's process, which a
// loaded server may run well after the statement it was meant for has
// ended (pgx waits 100 ms after sending it, no more). Lent again, the
// connection's next statement, another caller's, could be the one
// cancelled: a finish, a claim or a read failing with 57014 for a
// timeout that was not theirs. Closing the connection instead costs one
// connect after each interrupted statement, which is rare (a handler's
// timeout, a shutdown, a client gone from an API call).
func keepUncancelled(c *pgx.Conn) bool {
	return c.PgConn().CustomData()[cancelSentKey] == nil
}

// outOfOrder lets goose apply a migration numbered below the newest one
// applied: migrations written on parallel branches (00007 and 00008, say)
// may reach a database in either order.
var outOfOrder = goose.WithAllowOutofOrder(true)

// MigrationClientCheck is the client_connection_check_interval of the
// sessions Open applies migrations through, unless
// Options.ClientCheckInterval sets another: while a migration's statement
// runs or waits for a lock, the server checks that often that the
// process is still there (a poll of the socket, next to nothing beside a
// migration's statements), and ends the session of one that was killed,
// with its locks, instead of running the statement to its end.
const MigrationClientCheck = time.Second

// migrationConns is the size of the pool Open applies migrations through:
// one connection holds the migration lock, another runs the migrations
// goose runs outside a transaction.
const migrationConns = 2

// migrationPools counts the pools openSchema opened to apply migrations,
// for tests: a store that finds its schema current opens none.
var migrationPools atomic.Int64

// openSchema makes sure the current schema holds hookbox's tables at this
// hookbox's version. It looks first, on the store's pool, changing
// nothing (checkSchema), so a process that finds the schema current
// opens no more connections than it serves with. When migrations are
// pending, it applies them (unless opts.Existing, which refuses the
// schema) through a pool of its own, opened like the store's (cfg, whose
// sessions run settings) and closed once they are applied, whose
// sessions also ask the server to check that the process is still
// there (MigrationClientCheck): a process killed while a migration runs
// or waits for a lock leaves no statement running, or waiting, with the
// locks it took held until it ends. The store's own sessions go without
// the check.
func (s *Store) openSchema(ctx context.Context, cfg *pgxpool.Config, settings string, opts Options) error {
	var schema *string
	var tables int
	err := s.pool.QueryRow(ctx, `SELECT current_schema(), (SELECT count(*) FROM pg_class
        WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND relname IN ('events', 'goose_db_version'))`).Scan(&schema, &tables)
	switch {
	case err != nil:
		return fmt.Errorf("postgres: open: %w: %w", hookbox.ErrUnavailable, err)
	case schema == nil && opts.Existing:
		return noSchema("postgres: no hookbox database: no schema on the search_path exists; create it, then run `hookbox migrate`")
	case schema == nil:
		return errors.New("postgres: migrate: no schema on the search_path exists; create it first")
	}
	pending, err := s.checkSchema(ctx, *schema, tables)
	switch {
	case err != nil || pending == nil:
		return err
	case opts.Existing:
		return pending
	}
	mcfg := cfg.Copy()
	mcfg.MinConns, mcfg.MinIdleConns, mcfg.MaxConns = 0, 0, migrationConns
	check := cmp.Or(opts.ClientCheckInterval, MigrationClientCheck)
	mcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, settings); err != nil {
			return err
		}
		return setClientCheck(ctx, c, check)
	}
	pool, err := pgxpool.NewWithConfig(ctx, mcfg)
	if err != nil {
		return connectError(err)
	}
	migrationPools.Add(1)
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrate(ctx, db, *schema)
}

// migrate applies the embedded migrations to schema through db, holding a
// session-level advisory lock while it does.
func migrate(ctx context.Context, db *sql.DB, schema string) error {
	// The migrations and goose's version table live in the current schema,
	// so the lock is per schema: processes sharing a schema take turns,
	// processes using different schemas of one database do not wait for each
	// other.
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(lockID(schema)),
		lock.WithLockTimeout(1, 300), // poll every second, for up to 5 minutes
	)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker), outOfOrder)
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	// A database a newer hookbox migrated is refused before anything is
	// applied to it, and again after, in case a newer hookbox migrated it
	// between this look and taking the lock.
	if err := newerSchema(ctx, db, p, schema); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate schema %q: %w", schema, err)
	}
	return newerSchema(ctx, db, p, schema)
}

// checkSchema looks at schema, which holds tables of hookbox's two
// marker tables (events and goose's version table), changing nothing. It
// returns pending, an error matching hookbox.ErrNoSchema, when migrations
// would bring the schema to this hookbox's version (it has no hookbox
// tables yet, or lacks versions this hookbox needs); nil when the schema
// is at that version. err is a failure to look, or a schema a newer
// hookbox migrated.
func (s *Store) checkSchema(ctx context.Context, schema string, tables int) (pending, err error) {
	if tables < 2 {
		return noSchema("postgres: no hookbox database in schema %q (no hookbox tables); run `hookbox migrate` or `hookbox serve` first", schema), nil
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, s.db, sub, outOfOrder)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	if err := newerSchema(ctx, s.db, p, schema); err != nil {
		return nil, err
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: schema version of %q: %w", schema, err)
	}
	more, err := p.HasPending(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: schema version of %q: %w", schema, err)
	}
	if more {
		return noSchema("postgres: the hookbox database in schema %q lacks migrations this hookbox needs (newest applied %d, newest known %d); run `hookbox migrate` first", schema, current, target), nil
	}
	return nil, nil
}

func noSchema(format string, args ...any) error {
	return hookbox.NoSchemaError(fmt.Sprintf(format, args...))
}

// parseError reports a malformed connection string without quoting it: the
// driver's own message repeats the string and can only mask a password on a
// best-effort basis.
//
// The reason pgx gives (an invalid port, pool_max_conns too small) is
// kept: ParseConfigError's text is "cannot parse `STRING`: REASON
// (CAUSE)", which parseError reads with the string left empty.
func parseError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return errors.New("postgres: cannot parse the database URL")
	}
	cause := pe.Unwrap()
	bare := *pe
	bare.ConnString = ""
	reason := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	if cause != nil {
		reason = strings.TrimSuffix(reason, " ("+cause.Error()+")")
	}
	if reason == bare.Error() {
		reason = "" // not the text expected: it might hold anything
	}
	var ue *neturl.Error
	if errors.As(cause, &ue) {
		cause = ue.Err // url.Error repeats the URL
	}
	switch {
	case reason != "" && cause != nil:
		return fmt.Errorf("postgres: cannot parse the database URL: %s: %v", reason, cause)
	case reason != "":
		return fmt.Errorf("postgres: cannot parse the database URL: %s", reason)
	case cause != nil:
		return fmt.Errorf("postgres: cannot parse the database URL: %v", cause)
	}
	return errors.New("postgres: cannot parse the database URL")
}

// lockID derives the advisory lock id for migrating schema.
func lockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hookbox goose migrations\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// Close closes the pool, waiting for connections in use to be returned
// and closed, for closeWait at most: then it returns an error, and the
// connections close on their own when their users are done and the
// server answers. It may be called more than once.
func (s *Store) Close() error {
	s.closeStore()
	s.notifier.stop()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.db.Close()
		s.pool.Close()
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-closed:
		return nil
	case <-t.C:
		return ErrConnectionsLeft
	}
}

// MaxConns is the most connections the store's pool opens (Options.MaxConns,
// else the URL's pool_max_conns, else DefaultMaxConns). Listen's connection
// is not one of them: it is taken out of the pool while it listens.
func (s *Store) MaxConns() int { return int(s.pool.Config().MaxConns) }

// ErrConnectionsLeft is what Close returns when the connections it closes
// were not all closed within closeWait: a program about to exit may take
// it for done, as the exit closes them.
var ErrConnectionsLeft = fmt.Errorf("postgres: close: the server did not answer within %s; the connections are left to close on their own (or at the process's exit)", closeWait)

// closeWait bounds Close: closing a connection the server no longer
// answers on (a network that drops packets) waits for pgx's cancel
// request to the server, 17 s in one stop during such an outage.
const closeWait = 3 * time.Second

// Ping reports whether the database answers and takes writes; its error
// matches hookbox.ErrUnavailable, and hookbox.ErrReadOnly too when the
// session is read-only (a standby, default_transaction_read_only): a
// database that answers but refuses every delivery is not ready. The
// read-only session's connection is closed, as the store closes one
// refused a write (readOnlyGuard), so the next Ping sees the database as
// it is then.
func (s *Store) Ping(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		if tooManyConnections(err) {
			return fmt.Errorf("postgres: ping: %w: %w: %v", hookbox.ErrUnavailable, hookbox.ErrTooManyConnections, err)
		}
		return fmt.Errorf("postgres: ping: %w: %v", hookbox.ErrUnavailable, err)
	}
	defer c.Release()
	var readOnly bool
	if err := c.QueryRow(ctx, `SELECT current_setting('transaction_read_only') = 'on'`).Scan(&readOnly); err != nil {
		return fmt.Errorf("postgres: ping: %w: %v", hookbox.ErrUnavailable, err)
	}
	if readOnly {
		c.Conn().Close(ctx) // the pool drops it when it is released
		return fmt.Errorf("postgres: ping: %w: %w (a standby after a failover, or default_transaction_read_only): "+
			"point the URL at the primary, or make the database writable again", hookbox.ErrUnavailable, hookbox.ErrReadOnly)
	}
	return nil
}

// SQLSTATE codes the store reacts to.
const (
	codeTooManyConnections   = "53300" // too many clients, or a role's or database's connection limit
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03" // lock_timeout ran out
	classDataException       = "22"
	classProgramLimit        = "54" // 54000: an index row too large, and the like
)

// tooManyConnections reports whether the server refused a connection
// because it has none free (max_connections, or a role's or database's
// CONNECTION LIMIT, is reached).
func tooManyConnections(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeTooManyConnections
}

// connectError is the error of Open when it cannot connect. When the
// server has no connection free, it says what to do.
func connectError(err error) error {
	if tooManyConnections(err) {
		return fmt.Errorf("postgres: %w: %w: %v: the server has no connection free for this role and database "+
			"(max_connections, or the role's or the database's CONNECTION LIMIT, is reached by other clients): "+
			"close some of their connections or raise the limit; hookbox serve needs pool_max_conns "+
			"(default %d) connections and one more to listen for new events", hookbox.ErrUnavailable, hookbox.ErrTooManyConnections, err, DefaultMaxConns)
	}
	return fmt.Errorf("postgres: %w: %v", hookbox.ErrUnavailable, err)
}

// retryable reports whether a failed transaction may simply be run again:
// the server rolled it back because of a conflict with another transaction
// (a deadlock, a lock wait longer than lock_timeout), or the request never
// left this process.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// isDataError reports whether the server refused a value of the statement
// (a data exception, class 22, or a program limit such as a too large
// index row, class 54): the input's fault, not the database's.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(strings.HasPrefix(pgErr.Code, classDataException) || strings.HasPrefix(pgErr.Code, classProgramLimit))
}

// queryError maps a driver error from a read to the hookbox errors: no row is
// ErrNotFound; a value the server refuses (SQLSTATE class 22, data exception,
// such as a filter that is not valid UTF-8) is an error of the request; any
// other failure is ErrUnavailable.
func queryError(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: %s: %w", op, hookbox.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, classDataException) {
		return fmt.Errorf("postgres: %s: invalid value: %v", op, err)
	}
	return fmt.Errorf("postgres: %s: %w: %w", op, hookbox.ErrUnavailable, err)
}
