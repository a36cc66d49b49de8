package hookbox

import (
	"context"
	"database/sql"
	"errors"
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
	// Lease is how long the claimed events stay leased unless extended.
	Lease time.Duration
	// Sources restricts the claim to these sources; empty means none.
	Sources []string
	// Strict claims at most one event of Sources[0], the lowest due id, and
	// only when no other event of that source holds a live lease.
	Strict bool
	// Now is the time the claim is made at (zero: time.Now()).
	Now time.Time
}

// Outcome is how one attempt at an event ended.
type Outcome struct {
	ID         int64
	Owner      string    // the lease token the event was claimed with
	Attempt    int       // the attempt number the claim gave it
	Status     Status    // StatusDone, StatusPending (retry at RetryAt) or StatusDead
	RetryAt    time.Time // for StatusPending
	Error      string    // why the attempt failed, truncated by the caller
	StartedAt  time.Time
	FinishedAt time.Time
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
type Tx struct {
	tx      *sql.Tx
	Dialect Dialect

	beforeFirst func(context.Context) error // run once, before the first statement
	used        bool
}

// NewTx wraps tx for a handler. beforeFirst, if not nil, runs once before
// the handler's first statement (a store opens its savepoint there).
func NewTx(tx *sql.Tx, d Dialect, beforeFirst func(context.Context) error) *Tx {
	return &Tx{tx: tx, Dialect: d, beforeFirst: beforeFirst}
}

// Used reports whether a statement went through t.
func (t *Tx) Used() bool { return t.used }

func (t *Tx) use(ctx context.Context) error {
	if t.used {
		return nil
	}
	t.used = true
	if t.beforeFirst != nil {
		return t.beforeFirst(ctx)
	}
	return nil
}

// ExecContext runs a statement that returns no rows.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.use(ctx); err != nil {
		return nil, err
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.use(ctx); err != nil {
		return nil, err
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query that returns at most one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := t.use(ctx); err != nil {
		// *sql.Row cannot carry an error we make; a query on a cancelled
		// context reports ours the same way.
		cancelled, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return t.tx.QueryRowContext(cancelled, query, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement for use within the transaction.
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := t.use(ctx); err != nil {
		return nil, err
	}
	return t.tx.PrepareContext(ctx, query)
}

// Transactor runs application code in a write transaction on the store's
// database: schema set-up for the tables a handler writes, or reads and
// writes outside the queue.
type Transactor interface {
	InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error
}

// WorkFunc runs one claimed event inside tx and says how it ended. Writes it
// made through tx are kept only if the outcome is StatusDone.
type WorkFunc func(ctx context.Context, tx *Tx, ev *Event) Outcome

// Queue is the work side of a store: the events table drained with leases.
// Every transition is guarded by the lease owner and status it expects.
type Queue interface {
	// Claim leases due events (pending, or processing with an expired lease)
	// in next_attempt_at order, incrementing their attempt count.
	Claim(ctx context.Context, p ClaimParams) ([]Event, error)

	// ExtendLeases pushes the lease end of the given events, still held by
	// owner, to until. Events no longer held are left alone.
	ExtendLeases(ctx context.Context, owner string, ids []int64, until time.Time) error

	// Finish applies outcomes in one transaction and records each attempt.
	// errs[i] is ErrLeaseLost where outcome i was refused; err is set when
	// nothing could be applied.
	Finish(ctx context.Context, outs []Outcome) (errs []error, err error)

	// Work runs fn for each event in one transaction, each under its own
	// savepoint: an event whose lease is lost is skipped; a non-done outcome
	// rolls back what fn wrote. The outcomes are applied in the same
	// transaction, which commits once. errs[i] is ErrLeaseLost where event i
	// was skipped. An outcome with an empty Status means fn chose not to run
	// the event: its writes are rolled back, nothing is applied, and the
	// event stays leased to the caller. A store may also leave events unrun
	// that way when one transaction cannot hold more handlers' writes
	// (PostgreSQL: 64), though never the first one it runs.
	Work(ctx context.Context, evs []Event, fn WorkFunc) (outs []Outcome, errs []error, err error)

	// ClaimWork claims as Claim does and runs fn over the claimed events as
	// Work does, in as few transactions as the store allows (SQLite: one,
	// so a batch of handlers costs one commit instead of two). Events fn
	// leaves unrun (empty Status) stay leased to p.Owner for a later Work.
	ClaimWork(ctx context.Context, p ClaimParams, fn WorkFunc) (evs []Event, outs []Outcome, errs []error, err error)

	// Attempts lists the recorded attempts at one event, oldest first.
	Attempts(ctx context.Context, eventID int64) ([]Attempt, error)
}

// Attempt is one recorded try at an event.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	Owner      string    `json:"owner"`
	Outcome    string    `json:"outcome"` // AttemptDone, AttemptRetry, AttemptDead or AttemptLost
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// Attempt outcomes as recorded in the attempts table.
const (
	AttemptDone  = "done"
	AttemptRetry = "retry"
	AttemptDead  = "dead"
	AttemptLost  = "lost" // refused: the lease had moved on
)

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

// Picked gives events that a store's ClaimWork picked without writing a
// lease (its transaction keeps others off them) the state a claim would
// have left: processing, one more attempt, leased to owner from at until
// until. Only the events the handlers leave unrun get that lease written
// (see Unrun).
func Picked(evs []Event, owner string, at, until time.Time) {
	for i := range evs {
		e := &evs[i]
		e.Status, e.Attempts, e.LeaseOwner = StatusProcessing, e.Attempts+1, owner
		e.NextAttemptAt, e.UpdatedAt = until, at
	}
}

// Unrun returns the ids of the events whose outcome is empty: not run, so
// still leased for a later Work.
func Unrun(evs []Event, outs []Outcome) []int64 {
	var ids []int64
	for i, o := range outs {
		if o.Status == "" {
			ids = append(ids, evs[i].ID)
		}
	}
	return ids
}
