package hookbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrLeaseLost reports that a transition was refused because the event is
// no longer leased to the caller: its lease expired and another worker
// claimed it, or it was replayed or finished meanwhile. The caller's outcome
// is discarded, never applied over the newer state.
var ErrLeaseLost = errors.New("lease lost")

// ClaimParams says what a worker wants to claim.
type ClaimParams struct {
	// Owner is the lease token written on every claimed row. It must be
	// unique per Claim call, so a guard on it cannot match a later claim of
	// the same event.
	Owner string
	// Limit is the most events to claim.
	Limit int
	// MaxPayloadBytes, when above zero, bounds the payload bytes a claim
	// (or WorkTx.Pick) returns: of the events it would take, in id
	// order, it keeps those before the first that would bring their
	// payloads' total past it. The first event is kept whatever its size,
	// so a payload larger than the bound is still worked, alone. Sizes
	// are read from the stored lengths, before any payload is: a claim of
	// 256 events of 32 MiB held 8 GiB at once.
	MaxPayloadBytes int64
	// Lease is how long the claimed events stay leased unless extended.
	Lease time.Duration
	// Sources restricts the claim to these sources; empty means none.
	Sources []string
	// Limits, when not nil, bounds each source's events apart: at most
	// Limits[i] of Sources[i] (0: none of it), and Limit all of them, so
	// that one claim serves several queues each up to its own share
	// instead of one claim per queue. It has one entry per source. Each
	// source's events are the first due (next attempt time, then id), as
	// when it is claimed alone. Strict and ByKey claims ignore it, and
	// WorkTx.Pick refuses it.
	Limits []int
	// Strict claims at most one event of Sources[0], the lowest due id, and
	// only when no other event of that source holds a live lease.
	Strict bool
	// Now is the time the claim is made at (zero: time.Now()).
	Now time.Time
	// ByKey orders deliveries of Sources per order key: a delivery is
	// claimed only when no delivery of its source with the same key and a
	// lower id is pending, processing or (unless SkipDead) dead, and no
	// delivery of that key, whatever its id, holds a live lease (a
	// replayed earlier one, or one whose ingest committed after a later
	// id was claimed, waits for the running one). So one key runs one
	// delivery at a time, in id order as far as commits allow, also
	// across processes, while different keys run in parallel. Only
	// deliveries with an order key are claimed (routing gives every
	// delivery of an ordered target one, and Queue.FillOrderKeys one to
	// those stored without). Claim supports it; WorkTx.Pick does not.
	ByKey bool
	// SkipDead lets a dead delivery release its key (see ByKey).
	SkipDead bool
	// RunningKeys, with ByKey, are order keys of Sources[0] the claimer
	// is running a delivery of: the claim takes no delivery of theirs,
	// whatever the leases say, and passes them without probing. A lease
	// can end while its delivery still runs (extensions that could not
	// reach the database in time); the caller knows better than the
	// lease that the key is busy. A key listed that is no longer running
	// only waits for the next claim.
	RunningKeys []string
	// RunningIDs are events the claimer is running: a plain claim (not
	// Strict, not ByKey) takes none of them, whatever their leases say,
	// for the same reason. (A strict source's claimer skips the claim
	// while it runs one; a claim by key has RunningKeys.)
	RunningIDs []int64
	// AfterKey, with ByKey, starts the walk over order keys after this
	// one (and wraps around), so that successive claims visit every key
	// in turn: pass the largest key the previous claim took. A claim by
	// key works one source, Sources[0], and costs what it visits: about
	// two index lookups per key it passes, never a row per queued
	// delivery.
	AfterKey string
	// MaxKeys, with ByKey, bounds the order keys one claim visits in each
	// of its two walks (0: DefaultMaxKeys); see KeyWalk.
	MaxKeys int
	// KeyCursor, with ByKey, when not nil, receives the key to pass as the
	// next claim's AfterKey when this one visited all the keys it may
	// without filling Limit: keys past them, whose deliveries may be due,
	// are reached next time even when every key visited is blocked (a dead
	// delivery holding it, one running, one waiting for its retry). It is
	// left as it is otherwise.
	KeyCursor *string
	// Rescue lets ClaimWork lease one event picked with an expired lease
	// (its worker may have died of it), counting the attempt, for the
	// caller to run alone; without it such events are left as they are,
	// for a claimer that rescues. One claimer at a time should.
	Rescue bool
	// Mark, when its Key is set, is recorded with the picked events
	// before any handler runs (WorkTx.Mark), so that a crash of the
	// process while they run can be charged to them (Queue.OrphanMarks).
	Mark Mark
}

// DefaultMaxKeys is how many order keys a claim by key visits in each of
// its walks unless ClaimParams.MaxKeys says otherwise.
const DefaultMaxKeys = 4096

// KeyWalk is how many order keys a claim by key visits in each of its
// walks: MaxKeys, or DefaultMaxKeys.
func (p ClaimParams) KeyWalk() int {
	if p.MaxKeys > 0 {
		return p.MaxKeys
	}
	return DefaultMaxKeys
}

// FindKeyCursor sets *p.KeyCursor for a claim by key that came back short
// of Limit: to the last key of its first walk (from AfterKey) if that walk
// visited every key it may, else to that of its wrapped walk (from the
// first key, when AfterKey is set) if that one did; else it leaves it.
// walk reports, for the walk of p's keys after a key, its last key and
// whether it went the whole KeyWalk. The stores call it after the claim
// has committed: the cursor is a place to start, and a key freed or
// blocked since only moves it by that key.
func (p ClaimParams) FindKeyCursor(walk func(after string) (last string, full bool, err error)) error {
	walks := []string{p.AfterKey}
	if p.AfterKey != "" {
		walks = append(walks, "")
	}
	for _, after := range walks {
		last, full, err := walk(after)
		if err != nil {
			return err
		}
		if full {
			*p.KeyCursor = last
			return nil
		}
	}
	return nil
}

// Worker is the record of a running worker pool.
type Worker struct {
	Name string
	Host string // the machine it runs on: its host name and, on Linux, its pid namespace
	PID  int    // its process on that machine
}

// Mark records that a worker pool is running handlers over events picked
// without a lease (WorkTx.Pick), so that a process that dies while they
// run leaves a trace: the events of a mark whose pool has no record any
// more were in flight when it died, and each is charged that attempt.
type Mark struct {
	// Key names one claiming loop of a pool; a loop has at most one mark,
	// and a new one replaces it.
	Key string
	// Worker is the Worker.Name of the pool.
	Worker string
	// Events are the events as picked (WorkTx.Mark); from
	// Queue.OrphanMarks, those still unfinished with the attempt count
	// they were picked with, as stored now, without their payloads.
	Events []Event
}

// Outcome is how one attempt at an event ended.
type Outcome struct {
	ID         int64
	Owner      string    // the lease token the event was claimed with
	Attempt    int       // the attempt number the claim gave it
	Status     Status    // StatusDone, StatusPending (retry at RetryAt), StatusDead, or StatusProcessing (see NextAttemptAt)
	RetryAt    time.Time // for StatusPending and StatusProcessing
	Error      string    // why the attempt failed, truncated by the caller
	StartedAt  time.Time
	FinishedAt time.Time
	// Released, with StatusPending, gives the attempt back: it was cut
	// short by the worker's shutdown, not ended by its work, and must not
	// use up the event's retry budget. Finish moves the event's
	// AttemptBase up by one with it, so the next attempt is numbered after
	// this one (attempt numbers never repeat) while the count the retry
	// policy applies to stays where it was. The attempt is recorded as
	// AttemptReleased. With any other Status it is ignored.
	Released bool
	// NotRun, with StatusDead, ends the event without making the attempt
	// its claim counted: the claim came after the event's last attempt,
	// whose worker stopped without an outcome (its work may have killed
	// the process, and would kill this one). Finish takes that count back
	// in the write that marks the event dead, so the event's attempts are
	// those that were made (max_attempts, not one more), and records the
	// end as an AttemptNotRun row numbered after the last of them (see
	// AttemptsAfter). With any other Status it is ignored.
	NotRun bool
}

// NextAttemptAt is the next_attempt_at that applying o writes: RetryAt for
// a retry, and for an attempt charged with its event left processing and
// leased to nobody (queue.Runner.Recover: the lease ends when the retry is
// due, and the claim that rescues it then runs it alone); FinishedAt for
// an event done or dead. Written as FinishedAt, the charged event's lease
// ended at once and its retry skipped the policy's backoff.
func (o Outcome) NextAttemptAt() time.Time {
	if o.Status == StatusPending || o.Status == StatusProcessing {
		return o.RetryAt
	}
	return o.FinishedAt
}

// AttemptOutcome names the attempt outcome recorded for o: AttemptReleased
// for an attempt given back (see Released), AttemptNotRun for an event
// ended without running (see NotRun), else the one that leads to
// o.Status.
func (o Outcome) AttemptOutcome() string {
	switch {
	case o.Released && o.Status == StatusPending:
		return AttemptReleased
	case o.NotRun && o.Status == StatusDead:
		return AttemptNotRun
	}
	return AttemptOutcome(o.Status)
}

// AttemptsAfter is the event's attempt count once o is applied, and the
// number its attempts row bears: o.Attempt, the number its claim gave
// it, or one less for an event ended without running (see NotRun).
func (o Outcome) AttemptsAfter() int {
	if o.AttemptOutcome() == AttemptNotRun {
		return o.Attempt - 1
	}
	return o.Attempt
}

// Dialect names the SQL flavour of a transaction handed to a handler.
type Dialect string

// The two dialects hookbox stores speak. Both accept $1-style placeholders
// and INSERT … ON CONFLICT DO NOTHING.
const (
	DialectSQLite   Dialect = "sqlite"
	DialectPostgres Dialect = "postgres"
)

// Tx is the transaction a Go handler's database effects run in; the event's
// transition to done commits with it. It has the methods of *sql.Tx that
// run statements (so code written against a DBTX-style interface accepts
// it), and it lets the store open the handler's savepoint lazily: a handler
// that writes nothing costs no savepoint.
//
// A Tx is the handler's only while the handler runs. Once it returns, the
// worker ends it (End): rows of its QueryContext left open are closed, and
// every later call fails with ErrTxEnded, so that a goroutine that kept it
// cannot write into the savepoint of the next handler in the same
// transaction. A *sql.Row or *sql.Stmt it handed out is database/sql's, out
// of End's reach: scan the row, close a statement's rows, and use the
// statement only while the handler runs (see QueryRowContext and
// PrepareContext). The store
// commits or rolls back the transaction; a statement that would (COMMIT,
// END, ROLLBACK without TO, BEGIN, START, ABORT) is refused with
// ErrTxControl. A handler's own SAVEPOINT, RELEASE and ROLLBACK TO are
// allowed. A statement that fails and takes the whole transaction with it
// (SQLite's INSERT OR ROLLBACK, say) makes every later one fail with
// ErrTxLost: return its error.
//
// The handlers of a batch share one transaction, each in a savepoint of
// its own. So on PostgreSQL a setting a handler makes for the transaction
// (SET LOCAL, set_config(name, value, true): a row-level security
// tenant, a lock_timeout) outlives its savepoint: it holds for the
// handlers after it in the batch, and for the statements that mark them
// done. A handler that relies on such a setting sets it itself, before
// its first statement that needs it; one that changes what any statement
// needs (the role, search_path, a short statement_timeout) sets it back
// before it returns. A setting for the session (SET without LOCAL)
// outlives the transaction, on a connection the store lends again: make
// it LOCAL.
type Tx struct {
	tx      *sql.Tx
	Dialect Dialect

	// mu is held for reading by each call that runs a statement, for as
	// long as the call runs, and for writing by End: End waits for
	// statements already running, and none starts after it.
	mu    sync.RWMutex
	ended bool

	// state guards what the calls holding mu for reading change (a
	// handler may use t from several goroutines), and makes the first
	// call's beforeFirst run before any other statement.
	state       sync.Mutex
	beforeFirst func(context.Context) error // run once, before the first statement
	used        bool
	lost        bool        // a failed statement ended the whole transaction (SQLite)
	rows        []*sql.Rows // returned by QueryContext, closed by End
}

// ErrTxLost is returned by the methods of a Tx after one of its
// statements failed in a way that ended the whole transaction, not only
// itself. On SQLite some do (INSERT OR ROLLBACK, a trigger's
// RAISE(ROLLBACK), a full disk, an I/O error); the connection is then
// outside any transaction, and a statement after it would have committed
// on its own, apart from the event's outcome, and been applied again when
// the event ran again. The store rolls back what remains, and the
// handlers of the batch run again, each alone.
var ErrTxLost = errors.New("hookbox: tx: a failed statement ended the whole transaction: nothing written through this tx commits (return that statement's error)")

// checkLost is called after a statement through t failed. On SQLite it
// finds out whether the failure ended the transaction: if BEGIN succeeds
// there was none, and the one it opens holds whatever still runs on the
// connection until the store rolls it back; t then refuses every later
// statement (ErrTxLost). Inside a transaction, BEGIN fails and changes
// nothing. (A failure of a *sql.Stmt from PrepareContext is not seen
// here: the store still finds the handler's savepoint gone when the
// handler returns.)
func (t *Tx) checkLost(err error) {
	if err == nil || t.Dialect != DialectSQLite {
		return
	}
	if _, berr := t.tx.ExecContext(context.Background(), "BEGIN"); berr == nil {
		t.state.Lock()
		t.lost = true
		t.state.Unlock()
	}
}

// ErrTxEnded is returned by the methods of a Tx whose handler has
// returned (see Tx).
var ErrTxEnded = errors.New("hookbox: tx used after its handler returned (a goroutine kept it): the transaction belongs to the next handler or has ended")

// ErrTxControl is returned for a statement through a Tx that would begin
// or end the transaction (see Tx).
var ErrTxControl = errors.New("hookbox: transaction control through a handler's tx refused: the store commits or rolls back the transaction with the event's outcome (return an error to roll back the handler's writes; SAVEPOINT, RELEASE and ROLLBACK TO are allowed)")

// Lost returns ErrTxLost when a statement through t ended the whole
// transaction (see ErrTxLost), else nil. A store that commits once the
// function given the Tx returns checks it first: what it would commit is
// not what the function wrote.
func (t *Tx) Lost() error {
	t.state.Lock()
	defer t.state.Unlock()
	if t.lost {
		return ErrTxLost
	}
	return nil
}

// NewTx wraps tx for a handler. beforeFirst, if not nil, runs once before
// the handler's first statement (a store opens its savepoint there).
func NewTx(tx *sql.Tx, d Dialect, beforeFirst func(context.Context) error) *Tx {
	return &Tx{tx: tx, Dialect: d, beforeFirst: beforeFirst}
}

// Used reports whether a statement went through t.
func (t *Tx) Used() bool {
	t.state.Lock()
	defer t.state.Unlock()
	return t.used
}

// End ends t's use by its handler: it waits for statements running
// through t, closes the rows of its QueryContext that are still open, and
// makes every later call through t fail with ErrTxEnded. It does not
// end the underlying transaction, and calling it again does nothing.
func (t *Tx) End() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.ended = true
	// Rows left open keep the connection busy: PostgreSQL's driver cannot
	// run the savepoint's release until they are closed.
	t.CloseRows()
	// Statements prepared through t are left to database/sql, which closes
	// them as the transaction ends, once their rows are closed: closed
	// here, a statement whose rows were still open was finalized under
	// them, and SQLite's driver then reset freed memory as the rows closed
	// (the process died).
}

// CloseRows closes the rows of t's QueryContext that are still open, and
// leaves t usable. The worker calls it as soon as the handler returns,
// before it cancels the handler's context (End comes after): a query
// whose rows are still open when its context is cancelled has the driver
// ask the server to cancel it, and on PostgreSQL a cancel request the
// server acts on late cancels whatever statement the transaction runs
// next (the savepoint's release, the next handler's statement, the done
// marks). Closing the rows first sends none.
func (t *Tx) CloseRows() {
	t.state.Lock()
	rows := t.rows
	t.rows = nil
	t.state.Unlock()
	for _, r := range rows {
		r.Close()
	}
}

// use admits a statement: it refuses one after End or one that controls
// the transaction, and runs beforeFirst before the first. On success t.mu
// is held for reading until the caller calls done.
func (t *Tx) use(ctx context.Context, query string) (done func(), err error) {
	if kw := txControl(query); kw != "" {
		return nil, fmt.Errorf("%w (%s)", ErrTxControl, kw)
	}
	t.mu.RLock()
	if t.ended {
		t.mu.RUnlock()
		return nil, ErrTxEnded
	}
	t.state.Lock()
	if t.lost {
		t.state.Unlock()
		t.mu.RUnlock()
		return nil, ErrTxLost
	}
	if !t.used {
		t.used = true
		if t.beforeFirst != nil {
			err = t.beforeFirst(ctx)
		}
	}
	t.state.Unlock()
	if err != nil {
		t.mu.RUnlock()
		return nil, err
	}
	return t.mu.RUnlock, nil
}

// ExecContext runs a statement that returns no rows.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	done, err := t.use(ctx, query)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := t.tx.ExecContext(ctx, query, args...)
	t.checkLost(err)
	return res, err
}

// QueryContext runs a query. Rows still open when the handler returns are
// closed then.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	done, err := t.use(ctx, query)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := t.tx.QueryContext(ctx, query, args...)
	t.checkLost(err)
	if err == nil {
		t.state.Lock()
		t.rows = append(t.rows, rows)
		t.state.Unlock()
	}
	return rows, err
}

// QueryRowContext runs a query that returns at most one row. Scan it
// before the handler returns: until then its rows are open, and on
// PostgreSQL the handler's turn then fails (the connection is busy).
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	done, err := t.use(ctx, query)
	if err != nil {
		// *sql.Row cannot carry an error we make; a query on an ended
		// context reports the context's error, so hand it one that is ours.
		return t.tx.QueryRowContext(refused{ctx, err}, query, args...)
	}
	defer done()
	row := t.tx.QueryRowContext(ctx, query, args...)
	// The query's own failure is known before Scan (Row.Err): one that
	// ended the transaction is noticed as ExecContext's is.
	t.checkLost(row.Err())
	return row
}

// PrepareContext prepares a statement for use within the transaction;
// database/sql closes it when the transaction ends. Its calls do not go
// through t: use it only while the handler runs (End cannot refuse it),
// and close the rows of its queries before returning (on PostgreSQL, rows
// left open make the handler's turn fail).
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	done, err := t.use(ctx, query)
	if err != nil {
		return nil, err
	}
	defer done()
	return t.tx.PrepareContext(ctx, query)
}

// refused is a context that has ended with err, which also matches
// context.Canceled: database/sql reports it before running anything.
type refused struct {
	context.Context
	err error
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (r refused) Done() <-chan struct{} { return closedChan }
func (r refused) Err() error            { return refusedErr{r.err} }

type refusedErr struct{ error }

func (e refusedErr) Unwrap() []error { return []error{e.error, context.Canceled} }

// txControl returns the keyword that makes query a transaction control
// statement (one that begins, commits or rolls back the transaction
// itself, not to a savepoint), or "". It looks at the first statement
// only, past leading white space and comments: a guard against a
// handler's mistake, not a parser.
func txControl(query string) string {
	words := leadingWords(query, 3)
	if len(words) == 0 {
		return ""
	}
	kw := strings.ToUpper(words[0])
	switch kw {
	case "COMMIT", "END", "BEGIN", "START", "ABORT":
		return kw
	case "ROLLBACK":
		// ROLLBACK [TRANSACTION | WORK] TO [SAVEPOINT] name is a
		// savepoint's, in both dialects.
		rest := words[1:]
		if len(rest) > 0 && (strings.EqualFold(rest[0], "TRANSACTION") || strings.EqualFold(rest[0], "WORK")) {
			rest = rest[1:]
		}
		if len(rest) > 0 && strings.EqualFold(rest[0], "TO") {
			return ""
		}
		return kw
	}
	return ""
}

// leadingWords returns up to n words (runs of ASCII letters) at the start
// of query, each after white space and SQL comments (-- to the end of the
// line, /* … */). It stops at anything else.
func leadingWords(query string, n int) []string {
	var words []string
	i := 0
	for len(words) < n {
		i = skipSpace(query, i)
		j := i
		for j < len(query) && (query[j] >= 'a' && query[j] <= 'z' || query[j] >= 'A' && query[j] <= 'Z') {
			j++
		}
		if j == i {
			break
		}
		words = append(words, query[i:j])
		i = j
	}
	return words
}

// skipSpace returns the index of the first byte of query at or after i
// that is neither white space nor in a comment.
func skipSpace(query string, i int) int {
	for i < len(query) {
		switch rest := query[i:]; {
		case strings.IndexByte(" \t\n\r\f\v", rest[0]) >= 0:
			i++
		case strings.HasPrefix(rest, "--"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				return len(query)
			}
			i += end + 1
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return len(query)
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

// Transactor runs application code in a write transaction on the store's
// database: schema set-up for the tables a handler writes, or reads and
// writes outside the queue. On PostgreSQL the transaction, like the one
// Go handlers run in, is READ COMMITTED whatever the database's default
// isolation.
type Transactor interface {
	InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error
}

// WorkFunc runs one event inside tx and says how it ended. Writes it made
// through tx are kept only if the outcome is StatusDone. An outcome with an
// empty Status means fn chose not to run the event.
type WorkFunc func(ctx context.Context, tx *Tx, ev *Event) Outcome

// Queue is the work side of a store: the events table drained with leases.
// A store implements only primitive operations, each one statement or a
// few; the claim → run → finish orchestration that joins them (savepoints,
// isolating a handler that breaks its transaction, leasing what was left
// unrun) is written once, above every store, in package queue. Every
// transition is guarded by the lease owner and status it expects.
type Queue interface {
	// Claim leases due events (pending, or processing with an expired
	// lease) in next_attempt_at order, incrementing their attempt count,
	// and commits before it returns: the attempt is counted even if the
	// process dies while working it. The commit is on disk, and with it
	// every commit before it, before any event is returned: a worker acts
	// on the world with what it gets, so a power loss must undo neither
	// the claim nor what made the event claimable. It leases no event of
	// a paused queue (Ops.PauseTarget), whatever p.Sources says: the
	// pause is checked in the claim's own statement, so one committed
	// before the claim began holds for it. Each lease runs p.Lease
	// from its write, not from before the claim's waits (for a lock, or
	// SQLite's writer), unless p.Now is set. Events returned with an error are
	// leased all the same (a step after a commit failed: a by-key claim's
	// second transaction, the key cursor's read) and must be worked.
	Claim(ctx context.Context, p ClaimParams) ([]Event, error)

	// ExtendLeases pushes the lease end of the given events, still held by
	// owner, to until, moved later by however long the call waited before
	// its write (for a lock, or SQLite's writer), so that an extension
	// that waited does not end the lease it was meant to keep. Events no
	// longer held are left alone. A store that processes on several hosts
	// share (PostgreSQL) keeps lease ends and due times on its server's
	// clock: it writes until (and an outcome's RetryAt) as that distance
	// from the caller's time.Now, whatever the caller's clock reads.
	ExtendLeases(ctx context.Context, owner string, ids []int64, until time.Time) error

	// Finish applies outcomes of claimed events in one transaction and
	// records each attempt. errs[i] is ErrLeaseLost where outcome i was
	// refused; err is set when nothing could be applied. Outcomes with an
	// empty Status are skipped; one NotRun takes back the attempt its
	// claim counted (see Outcome.NotRun). An event finished done keeps no last
	// error, whatever Error its outcome carries (its attempt's record
	// keeps it): the last error says why the last attempt failed.
	Finish(ctx context.Context, outs []Outcome) (errs []error, err error)

	// BeginWork opens a write transaction for Go handlers (see WorkTx).
	// ctx bounds the whole transaction: when it ends, the transaction is
	// rolled back (as database/sql does with the context a transaction
	// begins with), also while a handler runs in it, and nothing more of
	// it can commit.
	BeginWork(ctx context.Context) (WorkTx, error)

	// Attempts lists the attempts at one event, oldest first: the rows
	// recorded, the first attempt when it succeeded on it (see
	// AttemptStored), and an AttemptUnknown entry for each attempt that
	// left no row (see WithUnknown).
	Attempts(ctx context.Context, eventID int64) ([]Attempt, error)

	// WorkerStarted records that the worker pool w runs from now on. It
	// returns the records of other pools: left behind by processes that
	// died, or kept by ones that are running.
	WorkerStarted(ctx context.Context, w Worker) (others []Worker, err error)

	// WorkerSeen refreshes (or makes) name's record, and deletes the records of other
	// pools not seen for staleAfter (their processes died). It returns how
	// many it deleted.
	WorkerSeen(ctx context.Context, name string, staleAfter time.Duration) (dead int, err error)

	// WorkerStopped deletes name's record: the pool stopped cleanly, or
	// (called by another pool) its process is known to be gone.
	WorkerStopped(ctx context.Context, name string) error

	// OrphanMarks returns the marks (see WorkTx.Mark) whose pool has no
	// record any more, each with those of its events that are still
	// unfinished and have the attempt count they were picked with: the
	// attempt that was running when the pool's process died. The events
	// come without their payloads (Payload nil): charging them reads
	// none, and every dead pool's marks are read at once, each holding up
	// to that pool's payload budget.
	OrphanMarks(ctx context.Context) ([]Mark, error)

	// DropMark forgets the mark key.
	DropMark(ctx context.Context, key string) error

	// Paused lists the paused queue names (see Ops.PauseTarget), in byte
	// order of their names, whatever the database's collation.
	Paused(ctx context.Context) ([]Pause, error)

	// DueQueues lists, in byte order, the queue names that have an event
	// due now: pending or processing with a lease that has ended, at or
	// past its due time on the store's clock (the server's on
	// PostgreSQL). Every queue whose claim would lease an event at this
	// moment is listed; a listed one's claim may still lease nothing (a
	// strict queue whose event runs, an event claimed meanwhile). It only
	// reads, away from the writer where the store has one, and costs an
	// index seek or two per queue that holds unfinished events, however
	// many events each holds. The worker asks before each round of
	// claims, so that queues with nothing due cost no claim (a write
	// transaction) each.
	DueQueues(ctx context.Context) ([]string, error)

	// FillOrderKeys gives each unfinished (pending or processing) event
	// of queue that has no order key the key key(its delivery id), and
	// returns how many it gave. A claim by key (ClaimParams.ByKey) takes
	// only events with a key, and finding the others costs a read of the
	// queue's every unfinished event, too much for a claim: the worker
	// calls this now and then for its ordered queues instead (their
	// events stored before the target had order_by, or by a process
	// whose config has none). An event that a statement holds meanwhile
	// is left for the next call.
	FillOrderKeys(ctx context.Context, queue string, key func(deliveryID string) string) (int, error)
}

// WorkTx is an open transaction in which Go handlers run and their events'
// outcomes are applied, so that a handler's writes commit with its event's
// transition or not at all. Events reach it in one of two ways: picked by
// the transaction itself (Pick, Repick: locked, not leased, their attempt
// counted by FinishPicked or LeasePicked), or claimed earlier with a
// committed lease (Hold, then Finish). Methods are not safe for
// concurrent use. After any error the caller must Rollback.
type WorkTx interface {
	// Pick locks up to p.Limit due events of p.Sources for this
	// transaction without leasing them, in id order, and returns them as
	// stored with the time of the pick (the store's clock). Like Claim,
	// it returns none of a paused queue. p.Strict is not supported.
	Pick(ctx context.Context, p ClaimParams) (evs []Event, at time.Time, err error)

	// Repick locks the events of evs that are still due and have not been
	// worked since they were read (their attempt count is still
	// evs[i].Attempts), reporting which it locked.
	Repick(ctx context.Context, evs []Event) ([]bool, error)

	// Hold locks the events of evs still leased to the owner they were
	// claimed with (evs[i].LeaseOwner) and reports which: only those may be
	// worked in this transaction.
	Hold(ctx context.Context, evs []Event) ([]bool, error)

	// Tx returns the transaction handed to handlers; its first statement
	// runs beforeFirst (the caller opens the handler's savepoint there).
	// The caller ends it (Tx.End) once the handler returns, before it
	// releases or rolls back the handler's savepoint.
	Tx(beforeFirst func(context.Context) error) *Tx

	// Savepoint marks the state before a handler's writes; Release keeps
	// them; RollbackTo discards them. An error from Release or RollbackTo
	// means the handler broke the transaction.
	Savepoint(ctx context.Context) error
	Release(ctx context.Context) error
	RollbackTo(ctx context.Context) error

	// Mark records m (m.Events as picked) so that it outlives a crash of
	// this process, before any handler runs; a successful Commit drops
	// it. It must not need the write lock this transaction holds.
	Mark(ctx context.Context, m Mark) error

	// MaxKept is how many handlers' released savepoints one transaction
	// may keep (0: no limit). PostgreSQL caches 64 subtransactions per
	// backend; past that every session slows down.
	MaxKept() int

	// Finish applies outcomes of held events (see Hold), as Queue.Finish
	// does, inside this transaction.
	Finish(ctx context.Context, outs []Outcome) ([]error, error)

	// FinishPicked applies outcomes of events this transaction picked,
	// counting their attempt: outs[i].Attempt is the attempt number. An
	// outcome NotRun counts none (see Outcome.NotRun).
	FinishPicked(ctx context.Context, outs []Outcome) error

	// LeasePicked leases events this transaction picked but did not run
	// to owner until until, counting an attempt, as Claim would have.
	LeasePicked(ctx context.Context, ids []int64, owner string, until, at time.Time) error

	Commit(ctx context.Context) error
	Rollback() error
}

// Attempt is one try at an event.
type Attempt struct {
	Attempt int    `json:"attempt"`
	Owner   string `json:"owner"`
	Outcome string `json:"outcome"` // AttemptDone, AttemptRetry, AttemptReleased, AttemptDead, AttemptNotRun, AttemptLost, AttemptReplay, AttemptSkip or AttemptUnknown
	Error   string `json:"error,omitempty"`
	// StartedAt and FinishedAt are zero, and left out of JSON, for an
	// AttemptUnknown attempt.
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Took returns how long the attempt ran, and false when that is not known:
// a first attempt that succeeded keeps only its finish (see AttemptStored),
// so its start reads the same.
func (a Attempt) Took() (time.Duration, bool) {
	if a.FinishedAt.IsZero() || !a.FinishedAt.After(a.StartedAt) {
		return 0, false
	}
	return a.FinishedAt.Sub(a.StartedAt), true
}

// OperatorOwner is the Owner of the attempts rows an operator's command
// writes: a replay (AttemptReplay), a skip (AttemptSkip) and a retire
// (Ops.RetireTarget, AttemptDead). Each is a mark in the event's history,
// never an attempt: an operator runs no work.
const OperatorOwner = "operator"

// Attempt outcomes as recorded in the attempts table.
const (
	AttemptDone  = "done"
	AttemptRetry = "retry"
	// AttemptReleased is an attempt cut short by its worker's shutdown
	// and given back (Outcome.Released): due again at once, not counted
	// against the event's retry budget.
	AttemptReleased = "released"
	AttemptDead     = "dead"
	AttemptLost     = "lost" // refused: the lease had moved on
	// AttemptReplay marks where an operator replayed the event; its number
	// is that of the last attempt before the replay.
	AttemptReplay = "replay"
	// AttemptNotRun marks where an event claimed past its last attempt
	// was ended dead without running (Outcome.NotRun): the claim's count
	// was taken back, and its number is that of the last attempt made.
	AttemptNotRun = "not_run"
	// AttemptUnknown is an attempt that left no row (see WithUnknown):
	// it was counted when its event was claimed, and nothing recorded
	// how it ended. It is never stored.
	AttemptUnknown = "unknown"
)

// UnknownAttemptError is the Error of an AttemptUnknown attempt.
const UnknownAttemptError = "no outcome was recorded: the process running it stopped during it " +
	"(killed, crashed or its host lost) or could not record it, and the event was claimed again; " +
	"whether its work took effect is not known"

// WithUnknown returns as, the attempts rows of an event (and its first
// attempt when it succeeded, see AttemptStored) in the order they were
// written, with an AttemptUnknown entry for each attempt number that has
// none: an attempt is counted when its event is claimed, and one whose
// process died during it (SIGKILL, the OOM killer, a host lost) records
// nothing before the next claim counts the next. Numbers go up to
// attempts, the event's count, or one below it while the event is
// processing (status): its last attempt may still be running. Each
// unknown entry comes before the first row of a later attempt, and
// before a mark that followed it (see Attempt.Made).
func WithUnknown(as []Attempt, attempts int, status Status) []Attempt {
	last := attempts
	if status == StatusProcessing {
		last--
	}
	have := make(map[int]bool, len(as))
	for _, a := range as {
		if a.Made() {
			have[a.Attempt] = true
		}
	}
	var out []Attempt
	n := 1 // the next number to look at
	upTo := func(k int) {
		for ; n <= k; n++ {
			if !have[n] {
				out = append(out, Attempt{Attempt: n, Outcome: AttemptUnknown, Error: UnknownAttemptError})
			}
		}
	}
	for _, a := range as {
		if !a.Made() {
			upTo(min(a.Attempt, last))
		} else {
			upTo(min(a.Attempt-1, last))
		}
		out = append(out, a)
	}
	upTo(last)
	return out
}

// Made reports whether a is an attempt made at its event (run, or
// counted and left without a row: AttemptUnknown) rather than a mark in
// its history: a row by the operator (OperatorOwner: a replay, a skip, a
// retire) or an end without running (AttemptNotRun), each numbered with
// the last attempt made before it, which may itself have left no row.
func (a Attempt) Made() bool {
	return a.Owner != OperatorOwner && a.Outcome != AttemptReplay && a.Outcome != AttemptSkip && a.Outcome != AttemptNotRun
}

// AttemptStored reports whether an attempt that ended with outcome (one of
// the Attempt… names) gets a row of its own in the attempts table. Every
// attempt does except an event's first when it succeeded, the common case:
// the event's row already says all a reader needs of it (status done after
// one attempt, finished at its updated_at), and leaving it out halves the
// rows a drain writes. Queue.Attempts lists it from the event, with the
// finish time as its start and no owner; a replay of such an event writes
// its row first, since the replay rewrites what it was read from.
func AttemptStored(attempt int, outcome string) bool {
	return attempt != 1 || outcome != AttemptDone
}

// AttemptOutcome names the attempt outcome that leads to status s.
func AttemptOutcome(s Status) string {
	switch s {
	case StatusDone:
		return AttemptDone
	case StatusDead:
		return AttemptDead
	}
	return AttemptRetry
}
