// Package sqlite is the embedded hookbox.Store: one database file, opened in
// WAL mode with synchronous=FULL unless told otherwise.
//
// Guarantees, under FULL: nothing leaves the store before it is on disk. A
// delivery is on disk before Ingest returns (before the 202), and an event
// before Claim hands it to a worker, together with the claim's counted
// attempt and every commit before it (see walSyncer).
//
// SQLite allows one writer at a time. The store therefore holds exactly one
// writer connection, every write transaction starts with BEGIN IMMEDIATE (so
// it takes the write lock up front instead of failing to upgrade later), and
// reads go through a separate pool of read-only connections that WAL lets run
// beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/slowcount"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the schema's migrations, the files goose applies (a
// "-- +goose Up" and a "-- +goose Down" section each), for tools and tests
// that take a database to an earlier version, as postgres.Migrations.
func Migrations() fs.FS { return mustSub(migrations, "migrations") }

// Options tune how the database file is opened.
type Options struct {
	// Synchronous is "FULL" (default: Ingest returns only after its commit
	// is synced to disk), or SQLite's "NORMAL" or "OFF" (faster; a power
	// loss may lose the last commits, which breaks the promise behind a
	// 202), or "EXTRA".
	Synchronous string
	// BusyTimeout is how long a connection waits for a lock held by another
	// process before giving up (default 5s).
	BusyTimeout time.Duration
	// Readers is the size of the read-only pool (default 4).
	Readers int
	// InlineSync makes FULL sync inside each COMMIT, as SQLite does on its
	// own, holding the write lock during the disk flush. Slower; it exists
	// to measure the naive way against the default.
	InlineSync bool
	// MaxWALBytes bounds the write-ahead log (default DefaultMaxWALBytes):
	// once the -wal file is larger, the background checkpoint is a
	// TRUNCATE run on the writer connection between two write
	// transactions, which waits for readers (at most 200 ms, then again
	// 5 s later), holds new writes for the time of one checkpoint, and
	// empties the file. A backstop: the writer's own checkpoints keep
	// the file near 4 MiB unless long reads keep them from finishing.
	MaxWALBytes int64
	// Existing opens an existing hookbox database only: Open never creates
	// the file nor applies migrations, and a missing file, a file without
	// hookbox's tables or with an older schema than this hookbox needs is
	// an error matching hookbox.ErrNoSchema. For commands that only read
	// or change existing events. Either way, a database migrated by a
	// newer hookbox is refused with an error matching ErrNoSchema.
	Existing bool
	// Serving marks the store as the one that serves the file: Open
	// takes a lock on PATH-serve.lock, held until Close, and refuses while
	// another store holds it, in this process or another, naming the
	// process. hookbox's design has one process writing and working a
	// SQLite file (its workers are woken by its own ingest, see Listen);
	// commands that read or change events beside it leave it unset.
	Serving bool
	// Logger receives the store's own lines (that a WAL fsync failed,
	// that the database file was deleted or replaced, or that an event
	// went dead because its payload could not be read after its claims,
	// see Store.Claim). Nil means slog.Default().
	Logger *slog.Logger
}

// Store is a hookbox.Store kept in one SQLite file.
type Store struct {
	path   string
	writer *sql.DB // exactly one connection
	reader *sql.DB // read-only connections

	// Statements prepared at Open (see stmts.go).
	inserts  chunked      // multi-row INSERT of events
	finishes chunked      // mark a claim's events done
	picked   chunked      // mark events ClaimWork picked done
	attempts chunked      // multi-row INSERT of attempts
	lease    *sql.Stmt    // a claim's lease of the events it picked (leaseSQL)
	claims   stmtCache    // claim statements by text
	durable  *walSyncer   // nil unless Synchronous is FULL
	file     *fileGuard   // the file Open opened, checked before acknowledging
	log      *slog.Logger // Options.Logger: the store's own lines
	// idFloor is set while the database may hold a placeholder of
	// RaiseIDFloor, which the next ingest that stores an event deletes.
	idFloor atomic.Bool
	// onDead is OnDead's function, nil until it is set.
	onDead atomic.Pointer[func(*hookbox.Event, hookbox.Outcome)]
	// done is Stats' last count of the done events (doneCount).
	done slowcount.Cache

	release         func()        // lets go of the serve lock (Options.Serving), also when called again; nil without it
	checkpointer    *sql.DB       // one connection, for background checkpoints
	maxWAL          int64         // WAL size past which a checkpoint truncates it
	busy            time.Duration // the connections' busy timeout
	stopCheckpoints chan struct{}
	checkpointsDone chan struct{}
	closeOnce       sync.Once
}

var (
	_ hookbox.Store          = (*Store)(nil)
	_ hookbox.IngestBeginner = (*Store)(nil)
)

// Open opens (creating if needed) the database at path and applies pending
// migrations. A database file Open creates is readable by its owner only
// (0600), and so are its -wal and -shm files.
//
// path is a file name, never a URI: '#', '?' and '%' are part of the name.
// A path through symbolic links names the file they lead to, where SQLite
// keeps the -wal and -shm files. ":memory:" is refused: hookbox needs a
// file, its WAL and fsync.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if path == ":memory:" {
		return nil, errors.New(`sqlite: ":memory:" cannot hold a hookbox store (each connection would get its own empty database, with no WAL to sync); give a file path`)
	}
	path, err := realPath(path)
	if err != nil {
		return nil, err
	}
	if !opts.Serving {
		return open(ctx, path, opts)
	}
	release, err := lockServe(path)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, path, opts)
	if err != nil {
		release()
		return nil, err
	}
	s.release = release
	return s, nil
}

// open is Open for a path realPath returned.
func open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	sync := strings.ToUpper(opts.Synchronous)
	var durable *walSyncer
	switch sync {
	case "", "FULL":
		sync = "FULL"
		if !opts.InlineSync {
			// FULL's promise, kept by walSyncer without holding the write
			// lock during the disk flush.
			sync, durable = "NORMAL", newWALSyncer(path, opts.Logger)
		}
	case "NORMAL", "OFF", "EXTRA":
	default:
		return nil, fmt.Errorf("sqlite: synchronous must be FULL, NORMAL, OFF or EXTRA, not %q", opts.Synchronous)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	readers := opts.Readers
	if readers <= 0 {
		readers = 4
	}

	if opts.Existing {
		if err := checkSchema(ctx, path, busy, false); err != nil {
			return nil, err
		}
	} else if err := createPrivate(path); err != nil {
		return nil, err
	}

	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+sync+")")
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		// Statement journals stay in memory instead of spilling to a
		// temporary file past 64 KiB (a pwrite per page); bulk operations
		// work in slices so no statement needs a large one.
		q.Add("_pragma", "temp_store(MEMORY)")
		// Never create the file: it exists by now (createPrivate made a
		// new one). A connection a pool opens later, after the file was
		// deleted (see fileGuard), fails instead of starting an empty
		// database at the path.
		q.Add("mode", "rw")
		for i := 0; i+1 < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		return fileURI(path, q)
	}

	// The writer checkpoints itself every 1000 WAL pages (SQLite's
	// default), as the commit that passes the mark returns: a PASSIVE copy
	// of about 4 MiB. That keeps the WAL small and reused from its start,
	// so a commit's fdatasync writes data into a file of a fixed size
	// rather than growing it. Left to a background connection alone,
	// checkpoints fell behind: under wrk at 23k deliveries a second the
	// WAL grew by 30 MB a second, and ingest's p99 was 95 to 240 ms
	// (against 11 to 26 ms this way, BENCHMARKS.md). The background loop
	// still checkpoints an idle writer's WAL and bounds it (see
	// checkpointLoop).
	// Its page cache is 16 MiB instead of 2: claims and finishes revisit
	// pages the inserts wrote, and each miss is a read system call.
	// secure_delete: what its statements delete (a purge, a payload
	// cleared, a trim of the rejected log, a logout, and the old copy of
	// a row an update rewrote) is overwritten with zeros in the pages it
	// writes, freed overflow pages included, rather than left readable in
	// the file's free space; see emptyWAL for the WAL.
	writer, err := sql.Open("sqlite", dsn("_txlock", "immediate", "_pragma", "wal_autocheckpoint(1000)",
		"_pragma", "cache_size(-16384)", "_pragma", "secure_delete(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	s := &Store{path: path, writer: writer, durable: durable, log: opts.Logger}
	if !opts.Existing {
		if err := s.migrate(ctx); err != nil {
			writer.Close()
			return nil, err
		}
		if err := s.writable(ctx); err != nil {
			writer.Close()
			return nil, err
		}
	}

	if err := s.prepare(ctx); err != nil {
		writer.Close()
		return nil, err
	}
	if err := s.loadIDFloor(ctx); err != nil {
		writer.Close()
		return nil, err
	}
	// The writer has the file open now (prepare read its schema): the
	// file to hold on to is the one it opened.
	if s.file, err = newFileGuard(path, opts.Logger); err != nil {
		writer.Close()
		return nil, err
	}

	reader, err := sql.Open("sqlite", dsn("_pragma", "query_only(1)"))
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	reader.SetMaxOpenConns(readers)
	reader.SetMaxIdleConns(readers)
	s.reader = reader

	checkpointer, err := sql.Open("sqlite", dsn())
	if err != nil {
		writer.Close()
		reader.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	checkpointer.SetMaxOpenConns(1)
	s.checkpointer = checkpointer
	s.maxWAL, s.busy = opts.MaxWALBytes, busy
	if s.maxWAL <= 0 {
		s.maxWAL = DefaultMaxWALBytes
	}
	if durable != nil {
		durable.prime()
	}
	s.stopCheckpoints = make(chan struct{})
	s.checkpointsDone = make(chan struct{})
	go s.checkpointLoop()
	return s, nil
}

// createPrivate creates the database file at path, empty and readable by
// its owner only, unless it exists. SQLite gives the -wal and -shm files it
// creates beside it the main file's permissions, so payloads and signature
// headers stay private in all three whatever the process umask. An
// existing file keeps the permissions it has.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	return f.Close()
}

// realPath is the absolute, symlink-free name of the database file at
// path, which SQLite, createPrivate, the WAL syncer and the WAL size check
// all use: SQLite follows symbolic links and keeps -wal and -shm beside
// the file they lead to. A file that does not exist yet is named in its
// directory's real path, after any links (dangling ones included) that
// lead to it; a missing directory is left for createPrivate or
// checkSchema to report.
func realPath(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: database path %s: %w", path, err)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real, nil
	}
	for hops := 0; ; hops++ {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return p, nil
		}
		p = filepath.Join(dir, filepath.Base(p))
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		if hops == 40 {
			return "", fmt.Errorf("sqlite: database path %s: too many symbolic links", path)
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("sqlite: database path %s: %w", path, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		p = target
	}
}

// fileURI is the SQLite URI of the database file at path with query q.
// The path is percent-escaped, so '%', '?' and '#' in it stay part of the
// file name for SQLite (see https://www.sqlite.org/uri.html), and the
// driver, which splits the name at its first '?', finds q whole.
func fileURI(path string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // a Windows drive letter: file:///C:/...
	}
	return u.String()
}

// checkpointInterval is how often the background connection copies the WAL
// back into the database file.
const checkpointInterval = 250 * time.Millisecond

// DefaultMaxWALBytes is the WAL size past which a checkpoint truncates it
// (Options.MaxWALBytes).
const DefaultMaxWALBytes = 256 << 20

// checkpointLoop runs PASSIVE checkpoints on its own connection until
// Close, for the WAL a writer left when it went idle. PASSIVE never waits
// for the writer or readers, so commits go on while it copies; once every
// frame is copied, the next commit restarts the WAL from its beginning.
// When readers keep the writer's own checkpoints from finishing and the
// file passes maxWAL anyway, or when a deletion could not empty the WAL
// (emptyWAL), the checkpoint is a TRUNCATE instead (see
// Options.MaxWALBytes).
func (s *Store) checkpointLoop() {
	defer close(s.checkpointsDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	// The oversize WAL and the deletions' marks are retried on timers of
	// their own: a reader that held the WAL long after a deletion must not
	// put off the truncation of a WAL grown past maxWAL.
	var nextTruncate, nextErase time.Time
	eraseWait := truncateBackoff
	for tick := 1; ; tick++ {
		select {
		case <-s.stopCheckpoints:
			return
		case <-t.C:
			if tick%idFloorLookEvery == 0 {
				s.lookForIDFloor()
			}
			now := time.Now()
			oversize, erase := s.walOversize(), s.erasePending()
			tryOversize := oversize && !now.Before(nextTruncate)
			tryErase := erase && !now.Before(nextErase)
			if tryOversize || tryErase {
				if erase {
					// Before the checkpoint: a mark made after this
					// is for a deletion it may not cover.
					s.markErase(false)
				}
				if s.truncateWAL() {
					eraseWait, nextErase = truncateBackoff, time.Time{}
					continue
				}
				if erase {
					s.markErase(true)
				}
				if tryOversize {
					// A reader held on: ingest must not wait on it
					// again at every tick.
					nextTruncate = now.Add(truncateBackoff)
				}
				if tryErase {
					// A reader that stays (Litestream follows the WAL
					// with one) would hold up ingest at every try: wait
					// longer after each.
					nextErase = now.Add(eraseWait)
					eraseWait = min(2*eraseWait, maxEraseWait)
				}
				continue
			}
			s.checkpointer.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// walOversize reports whether the WAL file is larger than maxWAL.
func (s *Store) walOversize() bool {
	fi, err := os.Stat(s.path + "-wal")
	return err == nil && fi.Size() > s.maxWAL
}

// emptyWAL empties the WAL after a deletion an operator asked for (a purge,
// payloads and what came with them cleared, the rejected log trimmed).
// secure_delete zeroes the deleted rows in the pages the deletion writes,
// but the WAL still holds older images of those pages (the rows as they
// were stored, claimed and finished, or as one batch of a purge left them
// for the next) until new commits overwrite them, which past the part of
// the file ordinary traffic reuses, or on a quiet database, may be never. A
// TRUNCATE checkpoint copies the newest images into the database file and
// cuts the WAL to nothing. When a reader keeps it from finishing (it waits
// for readers briefly: see truncateWAL), checkpointLoop tries again after
// truncateBackoff, then at doubling intervals up to maxEraseWait, until one
// does: the checkpointLoop of any process that has the file open, since the
// WAL is marked by a file (erasePath), not in memory. A `hookbox purge` run
// beside serve exits once it is done, and serve's loop then retries for it.
func (s *Store) emptyWAL() {
	s.markErase(false) // before the checkpoint, as in checkpointLoop
	if !s.truncateWAL() {
		s.markErase(true)
	}
}

// erasePath names the file whose presence says that the WAL may still
// hold rows a deletion removed (see emptyWAL).
func (s *Store) erasePath() string { return s.path + "-erase" }

// erasePending reports whether the WAL is marked as holding deleted rows.
func (s *Store) erasePending() bool {
	_, err := os.Stat(s.erasePath())
	return err == nil
}

// markErase marks the WAL as holding deleted rows, or removes the mark.
// Best effort: a mark that cannot be made leaves the deleted rows to be
// overwritten by later commits, as before emptyWAL.
func (s *Store) markErase(pending bool) {
	if !pending {
		os.Remove(s.erasePath())
		return
	}
	if f, err := os.OpenFile(s.erasePath(), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
}

// truncateWait bounds how long a truncating checkpoint waits for readers
// to leave the old WAL; it holds the writer connection, and so ingest,
// all that time. truncateBackoff is how long a checkpoint that gave up
// waits before the next try. maxEraseWait bounds the wait between tries
// to empty the WAL after a deletion (emptyWAL), which doubles from
// truncateBackoff while readers keep holding it.
const (
	truncateWait    = 200 * time.Millisecond
	truncateBackoff = 5 * time.Second
	maxEraseWait    = 10 * time.Minute
)

// truncateWAL runs a TRUNCATE checkpoint on the writer connection: it then
// takes its turn between this process's write transactions, rather than
// waiting for a moment with none, which back-to-back transactions never
// leave. It waits for readers at most truncateWait and reports whether it
// emptied the WAL.
func (s *Store) truncateWAL() bool {
	ctx := context.Background()
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	defer conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, s.busy.Milliseconds()))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, truncateWait.Milliseconds())); err != nil {
		return false
	}
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return false
	}
	return busy == 0
}

// outOfOrder lets goose apply a migration numbered below the newest one
// applied: migrations written on parallel branches (00007 and 00008, say)
// may reach a database in either order.
var outOfOrder = goose.WithAllowOutofOrder(true)

// migrate applies the embedded migrations through the writer connection,
// holding the migration lock (lockMigrations) so that processes opening
// one file at once take turns, and refuses a database a newer hookbox
// migrated (newerSchema), before applying anything and again after.
func (s *Store) migrate(ctx context.Context) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writer, Migrations(), outOfOrder)
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	unlock, err := lockMigrations(ctx, s.path)
	if err != nil {
		return err
	}
	defer unlock()
	if err := newerSchema(ctx, s.writer, p, s.path); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
	}
	return newerSchema(ctx, s.writer, p, s.path)
}

// writable refuses a database file the writer connection opened read-only.
// SQLite opens a file it may read but not write (another user's, or one
// with the immutable attribute) read-only without a word, and migrating a
// database whose schema is current writes nothing: serve would start and
// answer 503 to every delivery. sqlite3_db_readonly tells, without a
// write or a lock. (With Existing, commands that only read may open such
// a file.)
func (s *Store) writable(ctx context.Context) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return openError(s.path, err)
	}
	defer conn.Close()
	readOnly := false
	err = conn.Raw(func(dc any) error {
		ro, ok := dc.(interface{ IsReadOnly(string) (bool, error) })
		if !ok {
			return errors.New("the SQLite driver cannot tell whether the file is read-only")
		}
		readOnly, err = ro.IsReadOnly("main")
		return err
	})
	if err != nil {
		return openError(s.path, err)
	}
	if readOnly {
		return fmt.Errorf("sqlite: the database file %s is not writable by this user (uid %d), so SQLite opened it read-only; "+
			"fix its owner, mode or attributes (ls -l, lsattr), or run hookbox as the user that owns it", s.path, os.Getuid())
	}
	return nil
}

// checkSchema makes sure the file at path exists and holds hookbox's
// tables at the version this hookbox needs (olderOK: at that version or
// an older one, never a newer). It opens the file without
// creating it and only reads: another application's database, or an empty
// file, is left exactly as it was.
func checkSchema(ctx context.Context, path string, busy time.Duration, olderOK bool) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return noSchema("sqlite: no hookbox database at %s (no such file); run `hookbox migrate` or `hookbox serve` first", path)
	}
	q := url.Values{}
	q.Add("mode", "rw")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", fileURI(path, q))
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
        WHERE type = 'table' AND name IN ('events', 'goose_db_version')`).Scan(&n)
	if err != nil {
		return openError(path, err)
	}
	if n < 2 {
		return noSchema("sqlite: no hookbox database at %s (the file has no hookbox tables); run `hookbox migrate` or `hookbox serve` first", path)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, Migrations(), outOfOrder)
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	if err := newerSchema(ctx, db, p, path); err != nil || olderOK {
		return err
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	if pending {
		return noSchema("sqlite: the hookbox database at %s lacks migrations this hookbox needs (newest applied %d, newest known %d); run `hookbox migrate` first", path, current, target)
	}
	return nil
}

func noSchema(format string, args ...any) error {
	return hookbox.NoSchemaError(fmt.Sprintf(format, args...))
}

// Close closes the store's pools. Calls made since fail (the file guard
// takes the -wal file SQLite removes as it closes for no deletion).
func (s *Store) Close() error {
	var err error
	s.file.closed.Store(true)
	s.closeOnce.Do(func() {
		close(s.stopCheckpoints)
		<-s.checkpointsDone
	})
	if s.durable != nil {
		err = s.durable.close()
	}
	err = errors.Join(s.writer.Close(), s.reader.Close(), s.checkpointer.Close(), err)
	if s.release != nil {
		// After the pools: the next store to serve the file starts once
		// this one has let it go.
		s.release()
	}
	return err
}

// Listen returns at once: one process writes the file, and it wakes its
// own workers; see hookbox.Store.
func (s *Store) Listen(ctx context.Context, wake func()) error { return nil }

// Ping checks that the writer can reach the file, that no fsync of the
// WAL has failed (after one the store refuses every delivery until it is
// reopened; see walSyncer), and that the file's path still names the file
// the store has open (see fileGuard), so /readyz reports it.
func (s *Store) Ping(ctx context.Context) error {
	if s.durable != nil {
		if err := s.durable.err(); err != nil {
			return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
		}
	}
	if err := s.file.check(); err != nil {
		return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	return nil
}

// settle returns once the write transaction just committed may be
// acknowledged, or an error wrapping hookbox.ErrUnavailable: its commit
// went into the file the database path names (fileGuard) and, under the
// FULL promise, is on disk (walSyncer). Every commit whose result leaves
// the store calls it: an ingest's receipts, a claim's events, a logout.
// It costs two stats per call, which is per group commit for ingest.
func (s *Store) settle() error {
	if err := s.file.check(); err != nil {
		return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
	}
	if d := s.durable; d != nil {
		if err := d.waitDurable(d.commit()); err != nil {
			return fmt.Errorf("%w: %v", hookbox.ErrUnavailable, err)
		}
	}
	return nil
}

// explain returns err, a write that failed, or, when the database file or
// its WAL was deleted or replaced (see fileGuard), the guard's failure,
// which wraps hookbox.ErrUnavailable and says what to do: a file swapped
// under SQLite makes writes fail in ways that name neither ("no such
// table", a disk I/O error) before any check has run. A failure the
// guard does not explain is returned as it is.
func (s *Store) explain(err error) error {
	if err == nil || errors.Is(err, errFileGone) {
		return err
	}
	if gone := s.file.check(); errors.Is(gone, errFileGone) {
		return fmt.Errorf("%w: %v (the write failed: %v)", hookbox.ErrUnavailable, gone, err)
	}
	if isCorrupt(err) {
		return fmt.Errorf("%w; %s", err, corruptAdvice(s.path))
	}
	return err
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE), committing when fn
// returns nil and rolling back on error or panic.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return s.explain(fmt.Errorf("%w: begin: %w", hookbox.ErrUnavailable, err))
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback()
			err = s.explain(err)
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", hookbox.ErrUnavailable, err)
	}
	return nil
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromNullMillis(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return fromMillis(ms.Int64)
}

// prepare prepares the statements every batch uses, on the writer
// connection.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.inserts, err = prepareChunked(ctx, s.writer, insertSQL); err != nil {
		return err
	}
	if s.finishes, err = prepareChunked(ctx, s.writer, finishDoneSQL); err != nil {
		return err
	}
	if s.picked, err = prepareChunked(ctx, s.writer, finishPickedSQL); err != nil {
		return err
	}
	if s.attempts, err = prepareChunked(ctx, s.writer, insertAttemptsSQL); err != nil {
		return err
	}
	if s.lease, err = s.writer.PrepareContext(ctx, leaseSQL); err != nil {
		return fmt.Errorf("sqlite: prepare statement: %w", err)
	}
	s.claims.db = s.writer
	return nil
}
