package worker

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"time"
)

// Policy says how a source's events are retried.
type Policy struct {
	// MaxAttempts is how many attempts an event gets before it is dead
	// (default 20: with the default backoff, about 4 hours of retries,
	// see DefaultPolicy).
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait before a retry (defaults 1s
	// and 1h). The n-th retry waits a random time between BackoffMin and
	// min(BackoffMax, BackoffMin·2ⁿ⁻¹), and the first between BackoffMin
	// and 2·BackoffMin, never above BackoffMax: exponential, with full
	// jitter above the floor from the first retry on, so that the events of
	// a burst that failed together do not retry together (only when
	// BackoffMax equals BackoffMin is there no room to spread them). A
	// Retry-After from a target may lengthen the wait past BackoffMax, up
	// to MaxRetryAfter (see RetryAfter).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Timeout bounds one attempt (default 30s) through its context: the
	// ctx of a handler, Prepare, Apply or target ends then. Work that
	// ignores its ctx is not cut short: it runs on, an apply-only handler
	// or an Apply holding its transaction open (on SQLite, the only write
	// lock), until it returns, or until Stop abandons it.
	Timeout time.Duration
	// Strict runs the source's events one at a time in id order. A failed
	// event waits for its retry while newer ones proceed, so retries can
	// still reorder.
	Strict bool
}

// DefaultPolicy is the policy of a source that sets none. Its 20
// attempts, the n-th retry waiting up to min(1h, 2ⁿ⁻¹ s), keep an event
// that always fails for about 4 hours (half the time more, 7 at most,
// over 2 in 99 cases of 100: the jitter decides), so that an app down
// for a deploy, a restart loop or an incident of a few hours does not
// leave its events dead. Behind a circuit breaker (Controls; hookbox's
// default: after 5 failures in a row, a trial after 10 s, then 20 s,
// 40 s, ... up to 10 min), each attempt after the circuit opens is a
// trial, which makes it at least 1 h 40 min
// (TestDefaultPolicyOutlivesAnOutage).
var DefaultPolicy = Policy{MaxAttempts: 20, BackoffMin: time.Second, BackoffMax: time.Hour, Timeout: 30 * time.Second}

// withDefaults fills zero fields from DefaultPolicy.
func (p Policy) withDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultPolicy.MaxAttempts
	}
	if p.BackoffMin <= 0 {
		p.BackoffMin = DefaultPolicy.BackoffMin
	}
	if p.BackoffMax <= 0 {
		p.BackoffMax = DefaultPolicy.BackoffMax
	}
	if p.BackoffMax < p.BackoffMin {
		p.BackoffMax = p.BackoffMin
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultPolicy.Timeout
	}
	return p
}

// Backoff returns the wait before the retry that follows attempt n
// (1-based; less than 1 counts as 1): a random time between BackoffMin and
// min(BackoffMax, BackoffMin·2^max(n-1, 1)), see Policy.
func (p Policy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	n = max(n, 1)
	ceiling := doubled(p.BackoffMin, int64(max(n-1, 1)), p.BackoffMax)
	if ceiling <= p.BackoffMin {
		return p.BackoffMin
	}
	return p.BackoffMin + rand.N(ceiling-p.BackoffMin+1)
}

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the event goes to dead at once instead of being
// retried (a payload that can never be handled, a 410 Gone).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// exhaustedError marks an error as this process's own resource running
// out, not the work's answer.
type exhaustedError struct{ err error }

func (e exhaustedError) Error() string { return e.err.Error() }
func (e exhaustedError) Unwrap() error { return e.err }

// Exhausted wraps err, the failure of an attempt that could not be made
// because this process or its host ran out of a resource of its own (a
// fork refused with EAGAIN for the process limit, memory for a new
// process), so the attempt is given back instead of charged: the event
// is tried again after a backoff with its retry budget as it was, and
// never ends dead for it. Targets use it for what only they can tell
// apart; IsExhausted knows file descriptors by itself.
func Exhausted(err error) error {
	if err == nil {
		return nil
	}
	return exhaustedError{err}
}

// IsExhausted reports whether err was wrapped by Exhausted, or comes from
// this process or host running out of file descriptors (EMFILE, ENFILE:
// a dial, a pipe or a file hookbox could not open), which is never the
// answer of the app or command an attempt was for.
func IsExhausted(err error) bool {
	var e exhaustedError
	return errors.As(err, &e) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// conflictError marks an error as a transient conflict between
// transactions (see Conflict).
type conflictError struct{ err error }

func (e conflictError) Error() string { return e.err.Error() }
func (e conflictError) Unwrap() error { return e.err }

// Conflict wraps err, the failure of an attempt that lost a race with
// another transaction and would succeed if run again (a conflict the
// handler's own database, not hookbox's, reported), so the attempt is
// given back as IsConflict's are. Errors carrying PostgreSQL's SQLSTATE
// need no wrapping: IsConflict reads it.
func Conflict(err error) error {
	if err == nil {
		return nil
	}
	return conflictError{err}
}

// IsConflict reports whether err was wrapped by Conflict, or carries a
// database error whose SQLSTATE (read through its SQLState method, which
// pgx's *pgconn.PgError and lib/pq's *pq.Error have; never from its
// text) is a deadlock (40P01) or a serialization failure (40001): the
// transaction lost a race with another one and is meant to be run
// again, which is PostgreSQL's own advice for both. An attempt that ends
// so is rolled back to its savepoint (its writes, those made through
// package effect included, go with it) and given back, not charged
// (see MaxConflictsInARow).
//
// SQLite has no such error for a handler: hookbox's work transaction
// begins IMMEDIATE, holding the database's only write lock before the
// handler's first statement, so no other writer can conflict with it
// (an outside writer that holds the lock makes the transaction's begin
// wait, then fail as the store's failure, before any handler runs), and
// SQLITE_LOCKED within the one connection is the handler's own doing,
// which running it again does not cure.
func IsConflict(err error) bool {
	var c conflictError
	if errors.As(err, &c) {
		return true
	}
	switch sqlState(err) {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	}
	return false
}

// sqlState returns the SQLSTATE of the database error err carries, read
// through its SQLState method (pgx's *pgconn.PgError and lib/pq's
// *pq.Error have one), or "".
func sqlState(err error) string {
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) {
		return ""
	}
	return coded.SQLState()
}

// cancelledStatement reports whether err carries PostgreSQL's
// query_canceled (SQLSTATE 57014): a statement ended by a cancel request
// or by statement_timeout.
func cancelledStatement(err error) bool { return sqlState(err) == "57014" }

// MaxConflictsInARow is how many attempts in a row of one event a
// conflict (IsConflict) may end and be given back; the next one that
// does is charged as any failure is, and the count starts again. An
// event that conflicts every time (a handler that deadlocks with itself,
// or with a job that always holds its locks) so uses up its attempts
// MaxConflictsInARow+1 times slower than one that fails, and ends dead,
// rather than being retried for ever.
const MaxConflictsInARow = 5

// conflictDelayMin is the wait before the first try after a conflict.
const conflictDelayMin = 20 * time.Millisecond

// conflictDelay is the wait before the next try of an event whose
// attempt was given back as the run-th conflict in a row: from
// conflictDelayMin, doubling with the run, never above BackoffMin, with
// jitter (half of it to all of it), so that the two sides of a deadlock
// do not meet again at once.
func conflictDelay(pol Policy, run int) time.Duration {
	pol = pol.withDefaults()
	d := doubled(conflictDelayMin, int64(run-1), pol.BackoffMin)
	return d/2 + rand.N(d/2+1)
}

// exhaustedDelay is the wait before the next try of an event whose
// attempt was given back as the run-th in a row of the pool for want of
// its own resources (see outcome): the event's backoff at tries, as
// given back it does not grow, or, once the run goes on, a wait that
// doubles with it from BackoffMin up to BackoffMax or a minute, whichever
// is less, with jitter. A host that stays at its limit then has each
// event tried about once a minute, not every second, each try a write;
// one back under it works its events within that minute.
func exhaustedDelay(pol Policy, tries int, run int64) time.Duration {
	pol = pol.withDefaults()
	d := pol.Backoff(tries)
	if run <= 1 {
		return d
	}
	grown := doubled(pol.BackoffMin, run-1, min(pol.BackoffMax, time.Minute))
	return max(d, grown/2+rand.N(grown/2+1))
}

// doubled returns base doubled shift times, or limit if that is less
// (limit too for a negative shift). It never shifts past limit, so a long run cannot overflow: base<<34
// of a second is negative, and rand.N panicked on such a wait (a run of
// 35 exhausted attempts in a row, TestExhaustedDelayLongRun).
func doubled(base time.Duration, shift int64, limit time.Duration) time.Duration {
	if shift < 0 || shift >= 63 || base > limit>>shift {
		return limit
	}
	return base << shift
}

// retryAfterError asks for a retry no sooner than After.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// MaxRetryAfter is the longest wait a Retry-After is honoured for when the
// policy's BackoffMax is shorter (see RetryAfter).
const MaxRetryAfter = time.Hour

// RetryAfter wraps err with the earliest time to retry, as a Retry-After
// header asks. The retry waits that long, or its backoff if longer, but
// never more than MaxRetryAfter or the policy's BackoffMax, whichever is
// longer: an app that asks for more is tried again then (and a wrong or
// hostile value cannot park an event for years).
func RetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: after}
}

// retryDelay returns the wait before retrying after attempt n failed with
// err: its backoff, or the Retry-After err carries if longer, up to
// max(MaxRetryAfter, BackoffMax).
func (p Policy) retryDelay(n int, err error) time.Duration {
	d := p.Backoff(n)
	var ra retryAfterError
	if errors.As(err, &ra) && ra.after > d {
		d = min(ra.after, max(MaxRetryAfter, p.withDefaults().BackoffMax))
	}
	return d
}
