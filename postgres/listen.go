package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Wake-ups across processes. After Ingest has committed new rows the store
// sends NOTIFY on NotifyChannel with the current schema as payload; Listen,
// in any process on the same database, calls its wake function for each
// such notification from its own schema.
//
// The NOTIFY goes out as a statement of its own, from one goroutine per
// store, after the ingest transaction has committed: PostgreSQL serializes
// the commits of all transactions that notify (they take a database-wide
// lock held through the commit's WAL flush), so notifying inside Ingest
// would make concurrent ingests commit one at a time. Bursts collapse: while
// one NOTIFY is in flight, any number of ingests cause at most one more.
//
// A wake-up is only a hint to claim now; workers still poll, which covers
// notifications lost to a dropped connection.

// NotifyChannel is the channel Ingest notifies and Listen listens on.
const NotifyChannel = "hookbox_events"

var errStoreClosed = errors.New("postgres: listen: store closed")

// notifyTimeout bounds one NOTIFY.
const notifyTimeout = 5 * time.Second

// Listen's reconnection backoff.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// notifySQL sends the NOTIFY in a transaction of its own that commits
// without waiting for its WAL flush (synchronous_commit off for this
// transaction only). A NOTIFY makes its transaction take an id, so its
// commit writes a record that a synchronous commit would wait to flush:
// one more flush per ingest commit, for a hint that needs no durability.
// The rows it announces were flushed by their own commit before it runs.
const notifySQL = `SELECT pg_notify('` + NotifyChannel + `', current_schema()), set_config('synchronous_commit', 'off', true)`

// notifier sends NOTIFY for the ingests that signal it.
type notifier struct {
	pending chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func startNotifier(pool *pgxpool.Pool) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{pending: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.pending:
			}
			nctx, cancel := context.WithTimeout(ctx, notifyTimeout)
			// Best effort: a failure only delays the workers until they poll.
			pool.Exec(nctx, notifySQL)
			cancel()
		}
	}()
	return n
}

// signal asks for one NOTIFY, without waiting.
func (n *notifier) signal() {
	select {
	case n.pending <- struct{}{}:
	default: // one is already due; it will cover this ingest
	}
}

// stop ends the goroutine; it may be called more than once.
func (n *notifier) stop() {
	n.cancel()
	<-n.done
}

// Listen calls wake for every notification that events were ingested into
// this store's schema, by this or any other process, until ctx ends; it then
// returns ctx's error. It holds one connection of its own, taken out of the
// pool. When that connection fails it reconnects with a short backoff, and
// calls wake once each time it is listening again (events may have arrived
// meanwhile). When it cannot listen it logs a warning (Options.Logger), once
// until it listens again, which it logs too. Closing the store ends it with
// an error.
//
// wake must not block for long: it runs on the listening goroutine. A
// worker.Pool's Notify fits.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	delay := listenMinBackoff
	for {
		if s.closing.Err() != nil {
			return errStoreClosed
		}
		listened, err := s.listen(ctx, wake)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.closing.Err() != nil {
			return errStoreClosed
		}
		if listened {
			delay = listenMinBackoff
		} else if !s.listenFailing.Swap(true) {
			// Once per failure streak (listen says when it is over):
			// wake-ups only hasten the workers, but an operator
			// wondering why events wait for the poll should find why.
			s.log.Warn("postgres: cannot listen for new events; workers find them by polling until listening works again",
				"err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, listenMaxBackoff)
	}
}

// listen listens on one connection until it fails or ctx ends. It reports
// whether it got as far as listening.
func (s *Store) listen(ctx context.Context, wake func()) (bool, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is ours now: the pool may open another in its place,
	// and no other user will ever receive this one with LISTEN active.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	// The statements below run without a context: when ctx ends, the
	// connection's deadline interrupts them at once (a cancel request, the
	// store's usual reaction to an ended context, would not interrupt a
	// connection that only waits).
	interrupt := func() { conn.PgConn().Conn().SetDeadline(time.Now()) }
	stop := context.AfterFunc(ctx, interrupt)
	defer stop()
	stopOnClose := context.AfterFunc(s.closing, interrupt)
	defer stopOnClose()
	bg := context.Background()
	var schema *string
	if err := conn.QueryRow(bg, `SELECT current_schema()`).Scan(&schema); err != nil {
		return false, err
	}
	if _, err := conn.Exec(bg, `LISTEN `+NotifyChannel); err != nil {
		return false, err
	}
	if s.listenFailing.Swap(false) {
		s.log.Info("postgres: listening for new events again")
	}
	// The connection is out of the pool, so the pool's lifetime does not
	// renew it: it ends itself at the same age (see Options), so that it
	// does not outlive a switch of the server behind the URL. Listen then
	// listens on a new one, and wakes the workers for what was notified
	// in between.
	if cfg := s.pool.Config(); cfg.MaxConnLifetime > 0 {
		life := cfg.MaxConnLifetime
		if cfg.MaxConnLifetimeJitter > 0 {
			life += rand.N(cfg.MaxConnLifetimeJitter)
		}
		renew := time.AfterFunc(life, interrupt)
		defer renew.Stop()
	}
	wake()
	for {
		n, err := conn.WaitForNotification(bg)
		if err != nil {
			return true, err
		}
		if n.Channel == NotifyChannel && (schema == nil || n.Payload == *schema) {
			wake()
		}
	}
}
