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
// transition to done commits with it.
type Tx struct {
	*sql.Tx
	Dialect Dialect
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
	// event stays leased to the caller.
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
