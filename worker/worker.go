// Package worker drains hookbox's queue: it claims due events with a lease,
// runs the work registered for their source, and records the outcome.
//
// Guarantees:
//   - Every stored event is worked at least once until it is done or dead; an
//     event whose worker crashed is claimed again when its lease ends.
//   - A Go Handler's writes through its transaction commit together with the
//     event's transition to done, or not at all.
//   - Every transition is guarded by the lease: a worker that lost its lease
//     never overwrites a newer state (the store refuses, the pool reports it).
//   - Retries back off exponentially with jitter; after MaxAttempts the event
//     is dead, its payload kept for replay. Attempt numbers go on across
//     replays (the budget counts from Event.AttemptBase).
//   - Every attempt is counted, whatever ends it: an error, a panic, a
//     timeout, a handler that breaks its transaction (package queue charges
//     it alone, once it has failed again in a transaction of its own: a
//     single failure may be the database's), a process that dies (see
//     Start for the one exception).
//     Only an attempt that Stop cancels (see released), or whose outcome
//     the store failed to commit (see release), is given back, and not
//     twice in a row, nor one that ended in a permanent refusal: the
//     event is due again, its retry budget as it was.
//   - Nor is an attempt charged that this process could not make for want
//     of its own resources (IsExhausted), or whose handler lost a race
//     with another transaction (IsConflict: a deadlock or serialization
//     failure, by SQLSTATE): its writes are rolled back and it runs again
//     soon, up to MaxConflictsInARow times in a row before the next such
//     attempt counts.
//   - No queue (a source, or a named target) keeps another's events
//     waiting for slots: each may fill an equal share of Concurrency
//     before any takes more (see claimLeased), so a target that hangs
//     holds its share, not every slot, while others have events due.
//     Slots that no other queue asks for go to whoever has events due,
//     but for one in 32 of them (one at least, in a pool of 4 slots or
//     more) while a queue holds none: those are kept for it, so an idle
//     queue's next event starts at the next round even while targets
//     that hang hold all the others.
//   - Leases stay extended until the last running handler or target
//     returns, also while Stop waits for it (until Stop gives up on work
//     that ignores its cancelled context: see Stop).
//   - A pool never starts an event it is running, nor another of the same
//     order key or strict source, whatever the lease says: a lease can end
//     under a running event (extensions that could not reach the
//     database), and the pool knows better. Across processes the lease is
//     the only guard, as it must be for a dead process's events.
//   - A delivery of an ordered route (Controls.ByKey) stored without an
//     order key (before the target had order_by, or by a process whose
//     config has none) is worked all the same, as one whose event lacks
//     the value: the pool gives it a key of its own (fillKeys), so it
//     waits for no other and no other waits for it.
//
// Apply-only Go handlers (Handle) run inside a store transaction, several
// events to a transaction, each under its own savepoint: one commit (one
// disk sync) per batch instead of per event; nothing in them may wait
// outside the database. Targets (forward, exec) and the Prepare phase of
// two-phase handlers (HandlePhases) run outside any transaction,
// concurrently, under a lease that is extended while they run; their
// outcomes, and the Apply phases, are written back in batches (a target's
// outcome waits briefly for those of deliveries still running, see
// Options.FinishWait).
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/groupcommit"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/queue"
	"github.com/hookbox/hookbox/routing"
)

// Handler is a Go handler that only writes to the database. Writes it makes
// through tx commit with the event's done; an error rolls them back and
// schedules a retry (or dead, for a Permanent error); a panic counts as a
// failed attempt. It runs while the store's transaction is open (on
// SQLite, holding the database's only write lock), several events to a
// transaction: it must not wait on anything outside the database. A
// handler that calls other services is registered with HandlePhases.
//
// tx is the handler's until it returns, and no longer: calls through it
// after that (from a goroutine that kept it) fail with hookbox.ErrTxEnded,
// and rows of its QueryContext left open are closed (see hookbox.Tx for
// rows and statements it cannot close). The pool commits or rolls back the
// transaction; a COMMIT or ROLLBACK through tx is refused
// (hookbox.ErrTxControl). ctx ends at the source's Policy.Timeout, and at
// shutdown (Stop): a handler that ignores it runs on, holding the
// transaction.
type Handler func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error

// Phases is a Go handler in two phases, for work that calls other
// services as well as writing to the database.
type Phases struct {
	// Prepare runs first, outside any transaction, under the event's
	// lease: it may call other services, and must be safe to repeat (pass
	// effect.IdempotencyKey to services that deduplicate). Its result is
	// handed to Apply. An error fails the attempt.
	Prepare func(ctx context.Context, ev *hookbox.Event) (any, error)
	// Apply runs in the transaction that marks the event done, with what
	// Prepare returned; it may only write to the database. nil marks the
	// event done once Prepare succeeds. Its tx is used as a Handler's is:
	// only until Apply returns, never to commit or roll back.
	Apply func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, prepared any) error
}

// TwoPhase builds Phases from a typed prepare and apply.
func TwoPhase[T any](prepare func(ctx context.Context, ev *hookbox.Event) (T, error),
	apply func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, prepared T) error) Phases {
	return Phases{
		Prepare: func(ctx context.Context, ev *hookbox.Event) (any, error) { return prepare(ctx, ev) },
		Apply: func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, prepared any) error {
			v, _ := prepared.(T)
			return apply(ctx, tx, ev, v)
		},
	}
}

// Target performs an event's work outside any transaction: forwarding it,
// running a command, calling another service. nil means done. Deliver must
// not use ev once it has returned: the pool then drops ev's payload (sets
// it to nil), so that a large one is not kept while the outcome is
// recorded.
type Target interface {
	Deliver(ctx context.Context, ev *hookbox.Event) error
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, ev *hookbox.Event) error

// Deliver calls f.
func (f TargetFunc) Deliver(ctx context.Context, ev *hookbox.Event) error { return f(ctx, ev) }

// Options tune a Pool. The zero value is usable.
type Options struct {
	// Name identifies this process in lease owners (default host-pid).
	Name string
	// BatchSize is the most events claimed at once (default 256).
	BatchSize int
	// Concurrency is the most Target deliveries and two-phase Prepares in
	// flight (default 32), shared out among the queues (see claimLeased).
	Concurrency int
	// MaxPayloadBytes bounds the payload bytes the pool holds in memory
	// at once (default DefaultMaxPayloadBytes; negative for no bound).
	// The payloads of the deliveries and Prepares claimed and not yet
	// returned count against it, and a claim takes events only up to
	// what is left of it (hookbox.ClaimParams.MaxPayloadBytes): none
	// while nothing is left, and always one when nothing is held, so one
	// payload larger than the bound is still worked, alone. So the
	// payloads held stay under it plus one payload (the largest body a
	// source accepts). The payloads a transaction of Go handlers picks
	// or claims count against it too, until the transaction ends: the
	// bound holds for the targets, the Prepares and all TxWorkers
	// transactions together. Without it, BatchSize (for Go handlers) or
	// Concurrency (for targets) events were held whatever their size:
	// 256 payloads of 32 MiB are 8 GiB.
	MaxPayloadBytes int64
	// TxBudget is how long one transaction of Go handlers may keep starting
	// new handlers before it commits (default 50ms). On SQLite the
	// transaction holds the only write lock, so this bounds how long ingest
	// waits behind handlers.
	TxBudget time.Duration
	// PollInterval is the fallback when no wake-up arrives (default 1s).
	// It is also the longest a busy claim loop goes on from one read of
	// which queues have events due (see dueNow): a retry that comes due
	// meanwhile, or another process's ingest, waits at most this long.
	PollInterval time.Duration
	// TxWorkers is how many transactions of Go handlers may run at once
	// (default 1). Above 1 helps PostgreSQL, whose claims skip each other's
	// rows; SQLite runs one write transaction at a time whatever this is.
	TxWorkers int
	// ClaimDelay is how long the pool waits after a wake-up before it
	// claims, to gather more events per transaction (default 2ms; negative
	// for none). The wait ends early once enough slots (Concurrency) have
	// freed since the last claim for a claim to take half of what one
	// claim can, min(Concurrency, BatchSize), counting only the slots
	// free or held by work that began within the last two rounds of
	// claims (each pass of the pool's claim loop, after a wake-up or a
	// poll, is a round): slots held longer (a target that hangs) are left
	// out.
	ClaimDelay time.Duration
	// FinishWait is how long the outcome of a target's delivery may wait
	// for the outcomes of deliveries still running, so that one
	// transaction records them all (default 2ms; negative for none). It
	// waits only while another target delivery or Prepare runs, so the
	// outcome of a delivery running alone (a strict source's, on an
	// otherwise idle pool) is recorded at once.
	FinishWait time.Duration
	// Logger receives one line per failed attempt and per attempt given
	// back at shutdown (default: discard).
	Logger *slog.Logger
	// OnAttempt, if set, is called after each attempt is recorded. For an
	// event worked by a Target, ev.Payload is nil by then: the pool drops
	// it once the target returns (see Target). Events of Go handlers keep
	// theirs, but for those charged because a dead pool was running them
	// (see Start), read without their payloads.
	OnAttempt func(ev *hookbox.Event, o hookbox.Outcome, err error)
	// Redact, if set, masks secrets in error text before it is stored.
	Redact func(string) string
	// OnCircuit, if set, is called when a route's circuit opens or
	// closes (see Controls).
	OnCircuit func(source string, open bool)
	// OnStoreError, if set, is called for each of the pool's calls to the
	// store that failed (a claim, a batch of outcomes, the question which
	// queues have events due, ...), also those whose log lines are held
	// back (one per kind of call every 10 s): a count an alert can
	// follow while the store keeps failing, beside the log that says
	// which call and why.
	OnStoreError func()
	// StoreTimeout, when set, bounds each call the pool makes to the store
	// on its own account, one statement each: a claim, a batch of
	// outcomes, each lease extension, the pool's record, its marks. Over a
	// network such calls take milliseconds; one the database never answers
	// (its connection silently dropped by a firewall, which TCP notices
	// only after many minutes) is then given up, its connection closed,
	// and counts as a failed call: a claim is tried again, events whose
	// outcome was not recorded are worked again once their leases end.
	// DefaultStoreTimeout suits PostgreSQL (hookbox serve sets it there).
	// Leave it unset for SQLite, whose calls cannot be stranded but may
	// wait for the one writer as long as a transaction of Go handlers
	// holds it. Transactions of Go handlers and Applies are not bounded:
	// they run handler code, which a bound would cut.
	StoreTimeout time.Duration
	// Trace, if set, wraps each attempt of a Go handler (an apply-only
	// handler, or a two-phase handler's Prepare and its Apply): it returns
	// the context the handler runs in and a function to call with the
	// attempt's error when it ends. Targets wrap themselves
	// (tracing.Attempts).
	Trace func(ctx context.Context, phase string, ev *hookbox.Event) (context.Context, func(error))

	// applyBatchTimeout bounds one batch of Applies, all its transactions
	// (groupcommit's Timeout; zero: its default). Tests shorten it.
	applyBatchTimeout time.Duration
	// recordRefresh caps the interval between refreshes of the pool's
	// record (zero: recordRefresh). Tests shorten it.
	recordRefresh time.Duration
	// fillKeysEvery, when set, is the time between two rounds of
	// fillKeys, however long they take (zero: see fillKeysEvery). Tests
	// shorten it.
	fillKeysEvery time.Duration
	// onClaimWait, when set, is called by the claim loop each time it
	// waits: for a wake-up (woken false), or for ClaimDelay after one
	// (woken true), with the slots freed since it last claimed. Tests use
	// it to know the loop waits rather than claims.
	onClaimWait func(woken bool, freed int)
}

// route is what runs a source's events.
type route struct {
	policy   Policy
	handlers map[string]Handler // by event type; "" matches any
	phased   map[string]Phases  // by event type; "" matches any
	target   Target
}

// leased reports whether the route's events are claimed with a committed
// lease and worked outside a transaction first (targets, two-phase
// handlers) rather than picked and run inside one.
func (r *route) leased() bool { return r.target != nil || len(r.phased) > 0 }

// hasWork reports whether anything is registered to run the route's events.
func (r *route) hasWork() bool { return r.leased() || len(r.handlers) > 0 }

// Pool runs the work for events of the sources routed to it.
type Pool struct {
	q    hookbox.Queue
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	routes map[string]*route

	wake       chan struct{}
	extraWakes []chan struct{} // one per extra txLoop, made by New
	seq        atomic.Int64
	id         string
	cancel     context.CancelFunc // stops claiming
	abort      context.CancelFunc // cancels running work
	// workCtx is what the store's statements for running work run on
	// (shutdown does not cancel them, so cancelled attempts are still
	// recorded); abandon ends it, and with it every transaction of Go
	// handlers still open, when Stop gives up on work (see Stop).
	workCtx    context.Context
	abandon    context.CancelFunc
	stopped    chan struct{}      // made by the first Stop, closed when it returns
	stopExtend context.CancelFunc // stops extending leases, once no work runs
	wg         sync.WaitGroup     // claim loops and the work they started
	extendDone chan struct{}
	runner     queue.Runner
	finish     *groupcommit.Committer[hookbox.Outcome, error]
	apply      *groupcommit.Committer[prepared, queue.Result]
	leases     leaseSet
	slots      chan struct{} // work running: a target or a Prepare
	slotMu     sync.Mutex
	slotsBy    map[string]int // slots held, by queue (see claimLeased)
	// slotRound numbers the claim loop's rounds (newRound). slotsHeld
	// counts the slots held, slotsNew those of them taken in this round
	// ([0]) and in the one before ([1]); the others are slow (see
	// slowSlots). Under slotMu.
	slotRound uint64
	slotsHeld int
	slotsNew  [2]int
	// served orders the queues claimLeased claims alone: the sequence
	// number of each one's last claim that got events (serveSeq the
	// last given). The claim loop's own.
	served   map[string]uint64
	serveSeq uint64
	// due is the claim loop's last answer to which queues have events
	// due (see dueNow), reused while no queue can have come due that it
	// does not list; dueStale says events may have been stored, or come
	// due, since (Notify, a timer of the claim loop). The claim loop's
	// own, but dueStale.
	due      dueAnswer
	dueStale atomic.Bool
	// recording holds the events whose work has returned and whose
	// outcome is being committed; see runTargets.
	recording chan struct{}
	warm      *warm // runs targets and Prepare phases; see runTargets
	starting  bool  // Start was called: it registers the pool once only
	started   bool

	// recovering counts the claims for Go handlers still to be made one
	// event at a time with a committed lease; see Start.
	recovering atomic.Int64

	shortestLease time.Duration // extendLoop runs every third of it, or every recordRefresh if sooner

	// handling counts the apply-only handlers running now over events
	// picked without a lease, which leases does not hold; see InFlight.
	handling atomic.Int64

	// errLog spaces out the lines of logErr: a store that is down fails
	// every poll of every claiming loop.
	errLog lograte.Limiter
	// exhaustedRun counts the attempts given back in a row, across the
	// pool, because this process ran out of a resource of its own (see
	// outcome); any other outcome ends the run.
	exhaustedRun atomic.Int64

	// payloadHeld counts the payload bytes of the events claimed for
	// targets and Prepares whose work has not returned, and of those a
	// transaction of Go handlers picked or claimed until it ends, plus
	// what claims in flight have reserved (see reservePayloads and
	// Options.MaxPayloadBytes). One account for every claiming loop: each
	// loop counting on its own let TxWorkers transactions each hold the
	// whole budget.
	payloadHeld atomic.Int64
	// payloadWait says a claim found nothing left of MaxPayloadBytes: the
	// next payloads let go wake the claiming loops (Notify).
	payloadWait atomic.Bool

	txClaim atomic.Int64 // events the next claim for Go handlers takes; see txLimit
	txRuns  atomic.Int64 // whole claims run at txClaim since it last changed

	ctlMu      sync.Mutex
	controls   map[string]*control // routes with Controls, by name
	maxKeys    int                 // hookbox.ClaimParams.MaxKeys of claims by key (0: the store's default; tests set it)
	paused     map[string]bool     // paused names, as last read
	pausedRead time.Time
}

// DefaultMaxPayloadBytes is Options.MaxPayloadBytes unless set.
const DefaultMaxPayloadBytes = 64 << 20

// reservePayloads reserves, for one claim, what is left of
// MaxPayloadBytes: all of it, so that claims made at once (the claiming
// loop's for targets, TxWorkers transactions of Go handlers) cannot each
// take what is left. It returns the claim's budget
// (hookbox.ClaimParams.MaxPayloadBytes; 0 without a bound), or false
// when nothing is left: the claim is then not made, and comes when
// payloads are let go (releasePayloads wakes the pool). The claim then
// keeps what it took (settlePayloads), and gives it back when its work
// lets it go (releasePayloads). As a claim takes its first event
// whatever its size, the payloads held stay under the bound plus one
// payload, and a payload larger than the bound is worked while nothing
// else is held.
func (p *Pool) reservePayloads() (int64, bool) {
	limit := p.opts.MaxPayloadBytes
	if limit <= 0 {
		return 0, true
	}
	for {
		held := p.payloadHeld.Load()
		if held >= limit {
			p.payloadWait.Store(true)
			if p.payloadHeld.Load() >= limit {
				return 0, false // what is let go after the flag wakes the pool
			}
			continue
		}
		if p.payloadHeld.CompareAndSwap(held, limit) {
			return limit - held, true
		}
	}
}

// settlePayloads turns a claim's reservation of budget bytes into the
// payload bytes of what it took, evs.
func (p *Pool) settlePayloads(budget int64, evs []hookbox.Event) {
	if p.opts.MaxPayloadBytes > 0 {
		p.releasePayloads(budget - payloadBytes(evs))
	}
}

// releasePayloads gives n payload bytes back to MaxPayloadBytes (n may
// be negative: a claim took more than it reserved, its first event's),
// and wakes the pool if a claim found nothing left.
func (p *Pool) releasePayloads(n int64) {
	if n == 0 || p.opts.MaxPayloadBytes <= 0 {
		return
	}
	p.payloadHeld.Add(-n)
	if n > 0 && p.payloadWait.Swap(false) {
		p.wakeUp()
	}
}

// payloadBytes is the size of evs' payloads.
func payloadBytes(evs []hookbox.Event) int64 {
	var n int64
	for i := range evs {
		n += int64(len(evs[i].Payload))
	}
	return n
}

// DefaultStoreTimeout is the Options.StoreTimeout hookbox serve sets on
// PostgreSQL.
const DefaultStoreTimeout = 15 * time.Second

// claim leases events (hookbox.Queue.Claim) within StoreTimeout. Events
// the store returns with an error are leased all the same (a step after
// the claim's commit failed: the key cursor's read, a second by-key
// claim): they are returned to be worked, the error logged, as dropping
// them would leave them leased to nobody, their attempts counted.
func (p *Pool) claim(ctx context.Context, params hookbox.ClaimParams) ([]hookbox.Event, error) {
	ctx, cancel := p.storeCtx(ctx)
	defer cancel()
	evs, err := p.q.Claim(ctx, params)
	if len(evs) > 0 || err == nil {
		// Any claim that answers, events or none, ends a run of these
		// failures: on a quiet queue the next one leases nothing.
		p.logErr("claim (what it leased is worked all the same)", err)
		err = nil
	}
	return evs, err
}

// storeCtx bounds one of the pool's own calls to the store by
// StoreTimeout, when set.
func (p *Pool) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.opts.StoreTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.opts.StoreTimeout)
}

// New returns a Pool over q. Register work with Handle and Route, then Start.
func New(q hookbox.Queue, opts Options) *Pool {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.MaxPayloadBytes == 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if opts.TxBudget <= 0 {
		opts.TxBudget = 50 * time.Millisecond
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.TxWorkers <= 0 {
		opts.TxWorkers = 1
	}
	if opts.ClaimDelay == 0 {
		opts.ClaimDelay = 2 * time.Millisecond
	}
	if opts.FinishWait == 0 {
		opts.FinishWait = 2 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	p := &Pool{
		q:         q,
		opts:      opts,
		log:       opts.Logger,
		routes:    map[string]*route{},
		controls:  map[string]*control{},
		wake:      make(chan struct{}, 1),
		id:        opts.Name + "-" + hex.EncodeToString(rnd[:]),
		leases:    leaseSet{owners: map[int64]heldEvent{}, leases: map[string]time.Duration{}},
		slots:     make(chan struct{}, opts.Concurrency),
		slotsBy:   map[string]int{},
		served:    map[string]uint64{},
		recording: make(chan struct{}, opts.Concurrency),
		warm:      newWarm(),
		errLog:    lograte.Limiter{Every: errLogEvery},
	}
	for range opts.TxWorkers - 1 {
		p.extraWakes = append(p.extraWakes, make(chan struct{}, 1))
	}
	p.runner = queue.Runner{Queue: q, Charge: p.charge}
	p.txClaim.Store(int64(opts.BatchSize))
	return p
}

func (p *Pool) route(source string) *route {
	r, ok := p.routes[source]
	if !ok {
		r = &route{policy: DefaultPolicy, handlers: map[string]Handler{}, phased: map[string]Phases{}}
		p.routes[source] = r
	}
	return r
}

// Handle registers h for events of source with the given type ("" for any
// type without a handler of its own). A source has Go handlers or a Target,
// not both. Events of a handled source whose type has no handler are marked
// done without work.
func (p *Pool) Handle(source, eventType string, h Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.route(source)
	if r.target != nil {
		panic(fmt.Sprintf("worker: source %q already has a target", source))
	}
	r.handlers[eventType] = h
}

// PicksInTransactions reports whether some source's events are run by Go
// handlers (Handle) in transactions that pick them without a lease: a
// source that is neither strict nor has a Target or two-phase handlers.
// Such a transaction holds one of the store's connections while it writes
// its mark (hookbox.Mark) on another, so a store whose connections are
// pooled needs at least two for it.
func (p *Pool) PicksInTransactions() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.routes {
		if r.hasWork() && !r.leased() && !r.policy.Strict {
			return true
		}
	}
	return false
}

// HandlePhases registers a two-phase handler for events of source with the
// given type ("" for any type without a handler of its own). Once a source
// has one, all its events are claimed with a lease and prepared outside any
// transaction; handlers registered with Handle run as Apply alone.
func (p *Pool) HandlePhases(source, eventType string, h Phases) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.route(source)
	if r.target != nil {
		panic(fmt.Sprintf("worker: source %q already has a target", source))
	}
	r.phased[eventType] = h
}

// Route sends every event of source to t.
func (p *Pool) Route(source string, t Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.route(source)
	if len(r.handlers) > 0 || len(r.phased) > 0 {
		panic(fmt.Sprintf("worker: source %q already has Go handlers", source))
	}
	r.target = t
}

// handlerFor returns what runs an event of type eventType of route r: a
// two-phase handler (ok) or an apply-only one; both zero mark it done.
func (r *route) handlerFor(eventType string) (ph Phases, phased bool, h Handler) {
	if ph, ok := r.phased[eventType]; ok {
		return ph, true, nil
	}
	if h := r.handlers[eventType]; h != nil {
		return Phases{}, false, h
	}
	if ph, ok := r.phased[""]; ok {
		return ph, true, nil
	}
	return Phases{}, false, r.handlers[""]
}

// Works reports whether something is registered to run the events of
// source (a queue name, see hookbox.QueueName): a Target or Go handlers.
// A policy alone does not work them.
func (p *Pool) Works(source string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.routes[source]
	return ok && r.hasWork()
}

// SetPolicy sets the retry policy of source; zero fields take defaults.
func (p *Pool) SetPolicy(source string, pol Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.route(source).policy = pol.withDefaults()
}

// Notify wakes the pool to claim now; call it after new events commit.
func (p *Pool) Notify() {
	p.dueStale.Store(true)
	p.wakeUp()
}

// wakeUp wakes the pool to claim now, as Notify does, when no event can
// have come due by what happened (a slot or payload bytes freed, an
// event done or dead): the queues the claim loop read as due last are
// still the only ones (see dueNow).
func (p *Pool) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
	for _, w := range p.extraWakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Start begins claiming. Handle and Route must not be called after it.
// A pool starts once: a second Start fails, as does a Start after Stop
// (make a new pool with New instead), and neither touches the pool's
// record.
//
// A process that dies while a Go handler runs (os.Exit, a fatal runtime
// error, the OOM killer) must still be charged the attempt, or the event
// would crash the next process too, forever. A transaction that picks its
// events without a lease marks them first (hookbox.Mark), so a pool that
// starts charges each event of a dead pool's mark (register); those events
// are then run alone, one per claim (queue.Result.Rescued). A pool that
// finds the record of a pool that did not stop cleanly (Queue.WorkerStarted,
// or one gone stale while it runs: WorkerSeen) also goes into recovery: its
// next BatchSize × TxWorkers events for Go handlers are claimed one at a
// time, in the whole pool, with a committed, counted lease. An event that
// kills the process is so charged for every death and goes dead after its
// last attempt; the other events of the batch its first death ended are
// charged that death too, since which handler ended it is not known.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.checkOrdered(); err != nil {
		return err
	}
	p.mu.Lock()
	switch {
	case p.stopped != nil:
		p.mu.Unlock()
		return errors.New("worker: pool stopped, and a stopped pool cannot start again: make a new one with worker.New")
	case p.starting:
		p.mu.Unlock()
		return errors.New("worker: pool already started")
	}
	p.starting = true
	p.mu.Unlock()
	// Before the lock: charging a dead pool's events reads policies.
	p.register(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
	workCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	runCtx, abort := context.WithCancel(workCtx)
	claimCtx, cancel := context.WithCancel(ctx)
	extendCtx, stopExtend := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel, p.abort, p.stopExtend = cancel, abort, stopExtend
	p.workCtx, p.abandon = workCtx, abandon
	// An outcome waits for those of the deliveries still running (their
	// slots are freed before their outcomes are submitted), so that a
	// busy target's outcomes share a transaction: a forward drain spent a
	// quarter less CPU per event on SQLite, a tenth less on PostgreSQL
	// (BENCHMARKS.md, session 14).
	p.finish = groupcommit.New(p.finishBatch, groupcommit.Options{MaxBatch: p.opts.BatchSize, Timeout: p.opts.StoreTimeout,
		MaxWait: max(p.opts.FinishWait, 0), MoreComing: func() bool { return len(p.slots) > 0 }})
	p.apply = groupcommit.New(p.applyBatch, groupcommit.Options{MaxBatch: p.opts.BatchSize, Timeout: p.opts.applyBatchTimeout})

	var txSources, leasedSources, strict, ordered []string
	p.shortestLease = 0
	for name, r := range p.routes {
		if l := p.lease(r.policy); p.shortestLease == 0 || l < p.shortestLease {
			p.shortestLease = l
		}
		switch {
		case !r.hasWork():
			continue // a policy alone: nothing registered to run its events
		case r.policy.Strict:
			strict = append(strict, name)
		case r.leased():
			leasedSources = append(leasedSources, name)
			if _, ctls := p.controlled([]string{name}); len(ctls) > 0 && ctls[0].ByKey {
				ordered = append(ordered, name)
			}
		default:
			txSources = append(txSources, name)
		}
	}
	if p.shortestLease == 0 {
		p.shortestLease = p.lease(DefaultPolicy)
	}
	if len(txSources) > 0 {
		for i, w := range p.extraWakes {
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.txLoop(claimCtx, runCtx, txSources, w, i+1) }()
		}
	}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.claimLoop(claimCtx, runCtx, txSources, leasedSources, strict) }()
	if len(ordered) > 0 {
		slices.Sort(ordered)
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.fillKeysLoop(claimCtx, ordered) }()
	}
	p.extendDone = make(chan struct{})
	go func() { defer close(p.extendDone); p.extendLoop(extendCtx) }()
	return nil
}

// InFlight is the number of events this pool is working now: those it
// holds a lease on (their target, Prepare or Apply runs, or their outcome
// is being recorded), and those whose apply-only handler (Handle) runs
// now in a transaction of events picked without a lease. Events such a
// transaction picked whose handlers have not started, or have returned,
// are not counted: they wait only for the database.
func (p *Pool) InFlight() int { return p.leases.count() + int(p.handling.Load()) }

// Stop stops claiming, lets running work finish until ctx ends, then
// cancels it; cancelled attempts release their events for a prompt retry,
// without counting against their retry budgets.
// Leases stay extended until the last running handler or target returns.
//
// Work that ignores its cancelled context (a handler, Prepare or target
// that does not watch ctx) is waited for stopGrace more, then abandoned,
// and Stop returns ctx.Err(). Abandoning rolls back every transaction of
// Go handlers still open, from outside (a handler still running in one
// gets sql.ErrTxDone, and on SQLite the write lock is free again), and
// nothing the abandoned work does is recorded after that: a transaction of
// Go handlers cannot commit, and the outcome of a target or Prepare that
// returns later is dropped, not recorded nor released. Its events stay as
// they are, to be worked again: those a transaction picked are due at
// once, leased ones once their leases, no longer extended, end. The
// abandoned goroutines run on until their work returns.
//
// Then Stop records the pool's stop, within stopRecordBudget whatever
// StoreTimeout is; if the store fails it, the next start takes the pool
// for a dead one and charges an attempt to the events its marks name (see
// Start).
//
// A second call returns once the first has (or when its ctx ends).
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.started {
		p.mu.Unlock()
		return nil
	}
	stopped, first := p.stopped, p.stopped == nil
	if first {
		stopped = make(chan struct{})
		p.stopped = stopped
	}
	p.mu.Unlock()
	if !first {
		select {
		case <-stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(stopped)
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var err error
	abandoned := false
	select {
	case <-done:
	case <-ctx.Done():
		p.abort()
		err = ctx.Err()
		grace := time.NewTimer(stopGrace)
		select {
		case <-done:
		case <-grace.C:
			abandoned = true
			p.log.Warn("worker: stopped with work still running that ignores its cancelled context; abandoned: its transactions rolled back, its events left to be worked again (leased ones once their leases end)")
			p.abandon()
		}
		grace.Stop()
	}
	p.abort()
	p.warm.stop()
	if abandoned {
		// An abandoned Apply holds its batch, and Close waits for it:
		// close without waiting (Submit fails at once from now on).
		go p.apply.Close()
	} else {
		p.apply.Close()
	}
	p.finish.Close()
	p.stopExtend()
	<-p.extendDone
	// A mark left by a transaction that rolled back names events that are
	// due again, not lost: drop this pool's marks before its record, or
	// they would be charged as a dead pool's. These writes share one
	// budget, and the first that fails ends them: with the store gone,
	// each would wait its own StoreTimeout and the stop with them (a
	// stop during a PostgreSQL outage passed systemd's 60 s).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopRecordBudget)
	defer cancel()
	recorded := func(what string, ferr error) bool {
		if ferr != nil {
			p.logErr(what+" (skipped what was left to record: the next start takes this pool for a dead one and charges an attempt to the events its marks name)", ferr)
		}
		return ferr == nil
	}
	ok := true
	for slot := range len(p.extraWakes) + 1 {
		sctx, cancel := p.storeCtx(rctx)
		ok = recorded("drop the pool's marks", p.q.DropMark(sctx, p.markKey(slot)))
		cancel()
		if !ok {
			break
		}
	}
	if ok {
		sctx, cancel := p.storeCtx(rctx)
		recorded("record the clean stop", p.q.WorkerStopped(sctx, p.id))
		cancel()
	}
	runningHere.Delete(p.id)
	p.abandon() // nothing runs on workCtx any more, or it is abandoned
	return err
}

// stopRecordBudget bounds what Stop spends recording the pool's stop (its
// marks dropped, its record deleted) once its work is over.
const stopRecordBudget = 5 * time.Second

// stopGrace is how long Stop waits, once its context has ended and running
// work is cancelled, for that work to return and its outcomes to be
// recorded, before it abandons what still runs.
const stopGrace = time.Second

// abandoned reports whether Stop has abandoned the work still running
// (false before Start).
func (p *Pool) abandoned() bool { return p.workCtx != nil && p.workCtx.Err() != nil }

// runningHere holds the ids of the pools this process started and has not
// stopped. A pool record of this machine with this process's pid is one
// of them, alive, or else a pool of an earlier process that had the same
// pid (a restarted container), which died; see register.
var runningHere sync.Map

// register records the pool, forgets the pools of this machine whose
// process is gone, charges what dead pools were running, and puts the pool
// in recovery when another pool's record was there; see Start.
func (p *Pool) register(ctx context.Context) {
	// A store that cannot say starts the pool in recovery, to be safe; the
	// record is made by the first refresh that reaches it.
	host := machine()
	runningHere.Store(p.id, struct{}{})
	sctx, cancel := p.storeCtx(ctx)
	others, err := p.q.WorkerStarted(sctx, hookbox.Worker{Name: p.id, Host: host, PID: os.Getpid()})
	cancel()
	if err != nil || len(others) > 0 {
		p.logErr("record the pool", err)
		p.recover()
	}
	// A pool of this machine whose process is gone (or whose pid is now
	// ours, and which is not one of this process's own pools: its process
	// died and the pid was given again) died: forget it now, not once its
	// record goes stale, so what it was running is charged at once. The
	// machine includes the pid namespace (see machine), so a pool in
	// another container with the same host name is never judged by pids
	// that are not its own.
	for _, o := range others {
		_, ours := runningHere.Load(o.Name)
		if host != "" && o.Host == host && (o.PID == os.Getpid() && !ours || !processAlive(o.PID)) {
			p.log.Warn("worker: a pool of this machine stopped without a trace; charging what its Go handlers were running (its leased deliveries run again when their leases end)", "pool", o.Name, "pid", o.PID)
			sctx, cancel := p.storeCtx(ctx)
			err := p.q.WorkerStopped(sctx, o.Name)
			cancel()
			if err != nil {
				p.logErr("forget a dead pool", err)
			}
		}
	}
	p.chargeOrphans(ctx)
}

// machine names where this process runs, for its pools' records (Worker
// Host): the host name and, on Linux, the pid namespace. Pids compare only
// within one namespace: containers that share the host's name (host
// networking) each have their own, and there another hookbox's pid may be
// this process's, or name no process here, while it runs.
func machine() string {
	host, _ := os.Hostname()
	if host == "" {
		return ""
	}
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		return host + " " + ns // "pid:[4026531836]"
	}
	return host
}

// chargeOrphans charges the events that were running in pools that died
// (queue.Runner.Recover).
//
// Each charged attempt is reported as any other (Options.OnAttempt, and
// "event dead" for an event it ends), after one line naming the events.
func (p *Pool) chargeOrphans(ctx context.Context) {
	ctx, cancel := p.storeCtx(ctx)
	defer cancel()
	charged, err := p.runner.Recover(ctx)
	p.logErr("charge the events a dead pool was running", err)
	if len(charged) == 0 {
		return
	}
	var ids []int64
	var sources []string
	for _, r := range charged {
		if len(ids) < maxLoggedIDs {
			ids = append(ids, r.Event.ID)
		}
		if !slices.Contains(sources, r.Event.Source) {
			sources = append(sources, r.Event.Source)
		}
	}
	p.log.Warn("worker: charged an attempt to each event a dead pool was running", "events", len(charged),
		"event_ids", ids, "sources", sources)
	for i := range charged {
		p.report(&charged[i].Event, charged[i].Outcome, charged[i].Err)
	}
}

// maxLoggedIDs bounds the event ids one line lists.
const maxLoggedIDs = 20

// markKey names the mark of claiming loop slot (see hookbox.Mark).
func (p *Pool) markKey(slot int) string { return fmt.Sprintf("%s/%d", p.id, slot) }

// recover puts the pool in recovery; see Start.
func (p *Pool) recover() { p.recovering.Store(int64(p.opts.BatchSize * p.opts.TxWorkers)) }

// staleAfter is how long a pool's record may go unrefreshed before others
// take it for dead: well past the refresh interval of any pool, which
// recordRefresh caps whatever its timeouts, since another process judges
// this pool's record by its own staleAfter.
func (p *Pool) staleAfter() time.Duration { return max(time.Minute, 3*p.shortestLease) }

// recordRefresh is the longest a pool waits between refreshes of its
// record: a quarter of the shortest staleAfter, so that a pool whose
// leases are long (a source with a timeout of minutes) is not taken for
// dead by one whose leases are short.
const recordRefresh = 15 * time.Second

func (p *Pool) owner() string { return fmt.Sprintf("%s-%d", p.id, p.seq.Add(1)) }

// lease is how long claimed events stay ours without extension: twice the
// attempt timeout, extended every third of the shortest lease while the work
// runs, so a crashed process's events are free again soon after. It ends
// well after the attempt's deadline (about a timeout after it): an exec
// command's supervisor kills the command at that deadline by itself, so
// while this process is stopped (SIGSTOP, a debugger) and extends nothing,
// the command is dead before another process can claim its event (see
// target.ExecSupervisor).
func (p *Pool) lease(pol Policy) time.Duration { return max(2*pol.Timeout, time.Second) }

// claimLoop claims and dispatches until claimCtx ends.
func (p *Pool) claimLoop(claimCtx, runCtx context.Context, txSources, leasedSources, strict []string) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for claimCtx.Err() == nil {
		busy := false
		p.newRound()
		p.refreshPaused(claimCtx)
		if txs := p.active(txSources); len(txs) > 0 {
			full, err := p.runTx(claimCtx, runCtx, txs, false, 0)
			busy = busy || full
			p.logErr("claim and run handlers", err)
			// Its Go handlers ran in this loop, for as long as they
			// took: the pauses are read again (if older than
			// pausedEvery) before anything else is claimed, so a pause
			// committed meanwhile holds the claims below.
			p.refreshPaused(claimCtx)
		}
		// Strict sources first: each runs one event at a time, and a slot
		// free now must not go to another queue's backlog (claimLeased
		// gives whoever has events due what is left, a kept slot aside).
		strictOn, leasedOn := p.active(strict), p.active(leasedSources) // not paused
		strictNow, leasedNow := p.dueOnly(claimCtx, strictOn, leasedOn)
		var strictWait time.Duration // until an open circuit allows a trial
		for _, src := range strictNow {
			p.mu.Lock()
			leased := p.routes[src].leased()
			p.mu.Unlock()
			ctl := p.control(src)
			var err error
			switch {
			case leased && ctl != nil && !p.allows(ctl, &strictWait):
				// Its circuit is open: no claim until the trial's turn.
			case leased && p.leases.runs(src):
				// Its one event runs here, whatever its lease says; the
				// claim comes when it ends (its end wakes the loop:
				// wakeUp).
			case leased && len(p.slots) >= p.opts.Concurrency:
				// No slot is free: its event, claimed now, would hold this
				// loop (and the Go handlers it runs) until one frees. The
				// claim comes then (a freed slot wakes the loop: wakeUp).
			case leased:
				_, err = p.runTargets(claimCtx, runCtx, &inflight, []string{src}, true, 1, ctl)
			default:
				_, err = p.runTx(claimCtx, runCtx, []string{src}, true, 0)
			}
			p.logErr("strict claim", err)
		}
		if len(strictNow) > 0 {
			// A strict source's claim may have run Go handlers: as after
			// runTx above.
			p.refreshPaused(claimCtx)
			strictOn, leasedOn, leasedNow = p.active(strictOn), p.active(leasedOn), p.active(leasedNow)
		}
		plain, ctls := p.controlled(leasedNow)
		all := slices.Concat(p.leasedOnly(strictOn), leasedOn)
		more, wait, err := p.claimLeased(claimCtx, runCtx, &inflight, plain, ctls, all, p.slotsKept(len(all)))
		if strictWait > 0 && (wait == 0 || strictWait < wait) {
			wait = strictWait
		}
		p.logErr("claim for targets", err)
		// A claim for targets that got all it asked may have left more
		// due: claim again at once, unless too few slots are free for a
		// claim worth its transaction (the one or two freed while the
		// claim ran; claimWorth counts only the slots that are free or
		// can free soon, not those held by work that hangs). Those
		// events are claimed when enough slots free, as after any
		// wake-up (awaitSlots).
		if busy || more && (p.opts.ClaimDelay <= 0 || p.freeSlots() >= p.claimWorth()) {
			continue
		}
		sleep := p.opts.PollInterval
		if wait > 0 && wait < sleep {
			sleep = wait // a rate or a circuit allows a claim then
		}
		if p.due.names != nil {
			// The answer of which queues have events due (dueNow) is
			// reused until PollInterval after it was read: wake then, so
			// that a retry that came due since waits at most
			// PollInterval, not a round's reuse of it plus a whole sleep.
			if left := p.opts.PollInterval - time.Since(p.due.at); left > 0 && left < sleep {
				sleep = left
			}
		}
		poll.Reset(sleep)
		running := len(p.slots)
		if p.opts.onClaimWait != nil {
			p.opts.onClaimWait(false, 0)
		}
		select {
		case <-claimCtx.Done():
		case <-p.wake:
			p.awaitSlots(claimCtx, running)
		case <-poll.C:
			// Time has come for something: a poll, a rate's token, a
			// circuit's trial, whose retry may have come due since the
			// queues with events due were read.
			p.dueStale.Store(true)
		}
	}
}

// awaitSlots waits, after a wake-up, ClaimDelay before the next claim, so
// that one transaction claims many events instead of one: more
// deliveries commit, more slots free. On SQLite every claim takes the
// write lock that ingest needs too. It ends the wait early once
// claimWorth slots have freed since the loop last claimed (running were
// taken then): a claim then takes that many events at least, if so many
// are due, and waiting on would leave those slots idle (with a fast
// target, most of each round). A lone freed slot beside free ones or
// ones taken lately (a route at its max_concurrency, a trickle of
// ingest with the slots free) still waits the whole ClaimDelay. Slots
// held by slow work (a target that hangs until its timeout, or a remote
// one slower than two rounds) do not count towards claimWorth: they
// cannot free within the wait, and, counted, they kept the early end
// from ever coming once they held more than Concurrency less
// claimWorth. So beside slots that are nearly all slow, a lone freed
// slot may end the wait: a claim of one or two, as few as can free.
func (p *Pool) awaitSlots(ctx context.Context, running int) {
	if p.opts.ClaimDelay <= 0 {
		return
	}
	delay := time.NewTimer(p.opts.ClaimDelay)
	defer delay.Stop()
	for {
		freed := running - len(p.slots)
		if freed >= p.claimWorth() {
			return
		}
		if p.opts.onClaimWait != nil {
			p.opts.onClaimWait(true, freed)
		}
		// Each slot freed wakes the loop (wakeUp): a wake-up taken here
		// is answered by the claim that follows the wait.
		select {
		case <-ctx.Done():
			return
		case <-delay.C:
			return
		case <-p.wake:
		}
	}
}

// claimWorth is how many slots a claim for targets waits for (see
// awaitSlots): half of what one claim can take, min(Concurrency,
// BatchSize), of the slots that are free or can free soon: the slots
// held by slow work (slowSlots) are left out. Free slots count, so a
// lone freed slot beside idle ones still waits for ClaimDelay.
func (p *Pool) claimWorth() int {
	return max(1, min(p.opts.Concurrency-p.slowSlots(), p.opts.BatchSize)/2)
}

// newRound begins a round of the claim loop (each pass, whether it
// claims or not): the slots taken in the round before it are now those
// of the one before, and those taken before that are slow (slowSlots).
func (p *Pool) newRound() {
	p.slotMu.Lock()
	p.slotRound++
	p.slotsNew[1], p.slotsNew[0] = p.slotsNew[0], 0
	p.slotMu.Unlock()
}

// slowSlots counts the slots held by slow work: taken before the
// previous round of the claim loop (newRound) and held still, so that a
// whole round has begun and ended since. Work that ends within a round
// or two (a fast target, whose end is what wakes the loop for the next
// round) is not slow; a target that hangs until its timeout is, two
// rounds after its claim (a few ClaimDelays). A remote target (tens of
// milliseconds) is slow too, its slots rarely freeing within one
// ClaimDelay: claimWorth is then about half of what its last two rounds
// took, and its claims come somewhat more often, each a little smaller.
func (p *Pool) slowSlots() int {
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	return p.slotsHeld - p.slotsNew[0] - p.slotsNew[1]
}

// slotsKept is how many free slots claimLeased keeps for a queue that
// holds none, while the pool serves queues of them that take slots
// (paused ones left out, due or not) and one of them holds none: none
// for a lone queue, or in a pool of fewer than 4 slots, where a slot kept
// from busy queues would cost them a quarter of their pace or more; else
// one in 32 (at least one). Without them, queues whose targets hang took
// every slot the idle queues left, and the next event of another queue
// waited for one of them to free, as long as the hanging targets'
// timeout (30 s by default), each time until their circuits opened. Busy
// queues so run on Concurrency less a 32nd while the other queues are
// idle, which costs a target bound by its slots (a remote one, slow to
// answer) 3% of its pace.
func (p *Pool) slotsKept(queues int) int {
	c := p.opts.Concurrency
	if queues < 2 || c < 4 {
		return 0
	}
	return max(1, c/32)
}

// leasedOnly keeps, of sources, those whose events take a slot: a target
// or a two-phase handler's, not a Go handler's that runs in the claim's
// transaction.
func (p *Pool) leasedOnly(sources []string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range sources {
		if r := p.routes[s]; r != nil && r.leased() {
			out = append(out, s)
		}
	}
	return out
}

// freeSlots is how many of the slots (Concurrency) are free now.
func (p *Pool) freeSlots() int { return p.opts.Concurrency - len(p.slots) }

// Slots reports how many of the pool's slots (Options.Concurrency) work
// holds now, a target's delivery or a two-phase handler's Prepare each,
// and how many it has. Held at the total for long, the pool's
// deliveries wait for slots: they are bound by Concurrency or by a
// target that hangs, not by the database or the CPU.
func (p *Pool) Slots() (held, total int) { return len(p.slots), p.opts.Concurrency }

// dueOnly keeps, of the strict and the other queues a round of claimLoop
// is about to claim, those with an event due (hookbox.Queue.DueQueues) or
// a circuit waiting to try again:
// each claim is a write transaction, and with hundreds of targets most
// have nothing due most of the time, so one read per round costs less
// than a claim per queue. Below dueProbeMin queues the read is skipped, as
// it is when it fails (the round claims every queue, as without it).
func (p *Pool) dueOnly(ctx context.Context, strict, leased []string) ([]string, []string) {
	if len(strict)+len(leased) < dueProbeMin {
		return strict, leased
	}
	due := p.dueNow(ctx)
	if due == nil {
		return strict, leased
	}
	// A queue whose circuit is open stays too, due or not: claimLeased
	// makes no claim for it, but reads how long until its trial may go,
	// and the loop sleeps no longer than that. Without it, a retry that
	// came due during the cooldown would wait for the next poll.
	now := time.Now()
	keep := func(list []string) []string {
		out := make([]string, 0, len(list))
		p.ctlMu.Lock()
		defer p.ctlMu.Unlock()
		for _, s := range list {
			if c := p.controls[s]; due[s] || c != nil && c.open && now.Before(c.until) {
				out = append(out, s)
			}
		}
		return out
	}
	return keep(strict), keep(leased)
}

// dueAnswer is an answer of hookbox.Queue.DueQueues, as a set, and when
// it was asked.
type dueAnswer struct {
	names map[string]bool
	at    time.Time
}

// dueNow returns the queues with an event due, for dueOnly, or nil when
// the store cannot say. It reads them from the store (one seek per queue
// with unfinished events: tens of milliseconds a round at 2,000 queues,
// more than the round's claims) only when its last answer may miss one:
// events were stored since (Notify: ingest, a replay, a handler's sends,
// a retry or an attempt given back here), the claim loop slept until a
// timer (a poll, a rate's token, a circuit's trial), or PollInterval has
// passed since it was asked, by which a retry, a lease of another
// process or that process's ingest may have come due, as an idle pool
// finds them at its next poll (the claim loop sleeps no longer than the
// answer has left). The rounds answered from memory are those that
// follow a busy round or a freed slot (wakeUp). In between, a claim that
// found fewer events of a queue than it asked drops the queue from the
// answer (claimedShort), so the rounds of a drain do not give their
// slots to queues it emptied; a queue that came due since waits at most
// PollInterval, as it would while the pool sleeps.
func (p *Pool) dueNow(ctx context.Context) map[string]bool {
	if p.due.names != nil && !p.dueStale.Load() && time.Since(p.due.at) < p.opts.PollInterval {
		return p.due.names
	}
	// Cleared before the read: events stored while it runs mark the
	// next round's answer stale again.
	p.dueStale.Store(false)
	at := time.Now()
	// Bounded on its own: on SQLite it waits for one of the readers,
	// which long reads (console pages, exports) may all hold, and the
	// claims need none of them.
	sctx, cancel := context.WithTimeout(ctx, dueProbeWait)
	names, err := p.q.DueQueues(sctx)
	cancel()
	p.logErr("list the queues with events due", err)
	if err != nil {
		p.due = dueAnswer{}
		return nil
	}
	due := make(map[string]bool, len(names))
	for _, n := range names {
		due[n] = true
	}
	p.due = dueAnswer{names: due, at: at}
	return due
}

// claimedShort drops queues from the claim loop's last answer of which
// have events due (dueNow): a claim asked them for events and found
// fewer, so none is due now.
func (p *Pool) claimedShort(queues ...string) {
	for _, q := range queues {
		delete(p.due.names, q)
	}
}

// dueProbeMin is how many queues a round must have to claim before it
// asks which have events due: for one, the claim itself asks as cheaply.
const dueProbeMin = 2

// dueProbeWait bounds the read of dueOnly: it takes a few milliseconds at
// a thousand queues, and a round that cannot have it claims every queue.
const dueProbeWait = time.Second

// logErr logs a failed call to the store, what naming it (a fixed
// string): one line per what every errLogEvery, saying how many were held
// back (lograte), the others at debug. During an outage every claiming
// loop fails every poll: about three lines a second, with no traffic.
// Called with a nil err, it ends what's run of failures, if any, with an
// info line.
func (p *Pool) logErr(what string, err error) {
	if err == nil {
		// A call that failed before works again: one info line says so,
		// with how many failed, so the silence after an outage's lines
		// is not taken for more of it.
		p.errLog.LogCleared(context.Background(), p.log, what, "worker: "+what+": the store answers again")
		return
	}
	// Once Stop has abandoned the work, the store refuses all of it.
	if !errors.Is(err, context.Canceled) && !p.abandoned() {
		p.storeFailed()
		p.errLog.Log(context.Background(), p.log, slog.LevelError, what, "worker: "+what, func() []slog.Attr {
			return []slog.Attr{slog.Any("err", err)}
		})
	}
}

// logEventErr logs that the store failed what for ev, spaced out as
// logErr's lines are (one per kind every errLogEvery, the others at debug):
// during an outage with traffic every event fails so, and its release
// that follows is reported on its own line anyway.
func (p *Pool) logEventErr(what string, ev *hookbox.Event, err error) {
	p.storeFailed()
	p.errLog.Log(context.Background(), p.log, slog.LevelError, what, "worker: "+what, func() []slog.Attr {
		return []slog.Attr{slog.Int64("event_id", ev.ID), slog.String("source", ev.Source), slog.Any("err", err)}
	})
}

// storeFailed counts one failed call to the store (Options.OnStoreError).
func (p *Pool) storeFailed() {
	if p.opts.OnStoreError != nil {
		p.opts.OnStoreError()
	}
}

// errLogEvery is how often logErr writes a line per kind of failure, as
// the server does for a failing store.
const errLogEvery = 10 * time.Second

func (p *Pool) policy(source string) Policy {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.routes[source]; ok {
		return r.policy
	}
	return DefaultPolicy
}

func (p *Pool) maxTimeout(sources []string) Policy {
	pol := p.policy(sources[0])
	for _, s := range sources[1:] {
		if t := p.policy(s).Timeout; t > pol.Timeout {
			pol.Timeout = t
		}
	}
	return pol
}

// txLimit is how many events a claim for Go handlers takes: as many as the
// claiming transaction is expected to run itself, so that a single
// transaction claims, runs and finishes the batch. What it leaves unrun
// (TxBudget ran out, or the store's own cap on handlers whose writes one
// transaction keeps) must be leased and worked in more transactions, which
// costs a write per event. So the limit follows what the claiming
// transactions manage: halved (but not below what ran) when one leaves
// events unrun, and doubled, up to BatchSize, after txGrowAfter whole
// claims in a row.
func (p *Pool) txLimit() int { return int(p.txClaim.Load()) }

// txGrowAfter is how many whole claims in a row let txLimit grow again. A
// try that proves too big costs one lease write per event left unrun, so
// it is made rarely.
const txGrowAfter = 16

// adaptTxLimit updates txLimit after a claim that asked for limit events,
// got claimed, and whose transaction got through ran of them.
func (p *Pool) adaptTxLimit(limit, claimed, ran int) {
	switch {
	case ran < claimed:
		p.txClaim.Store(int64(max(ran, limit/2, 1)))
		p.txRuns.Store(0)
	case claimed == limit && limit < p.opts.BatchSize:
		if p.txRuns.Add(1) >= txGrowAfter {
			p.txClaim.Store(int64(min(2*limit, p.opts.BatchSize)))
			p.txRuns.Store(0)
		}
	}
}

// txLoop is an extra claimer for Go handlers (Options.TxWorkers): on
// PostgreSQL several transactions of handlers run at once, each claiming
// different events (SKIP LOCKED).
func (p *Pool) txLoop(claimCtx, runCtx context.Context, txSources []string, wake chan struct{}, slot int) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for claimCtx.Err() == nil {
		full := false
		if txs := p.active(txSources); len(txs) > 0 {
			var err error
			full, err = p.runTx(claimCtx, runCtx, txs, false, slot)
			p.logErr("claim and run handlers", err)
		}
		if full {
			continue
		}
		poll.Reset(p.opts.PollInterval)
		select {
		case <-claimCtx.Done():
		case <-wake:
		case <-poll.C:
		}
	}
}

// runTx claims a batch for Go handlers and works it in transactions of at
// most TxBudget each. It reports whether the claim took as many events as
// it asked for (so more may be due).
//
// A plain claim picks, runs and finishes in one transaction (queue.Runner
// ClaimWork): one row write per event. A strict claim, and every claim
// while the pool is recovering (see Start), leases one event with a
// committed lease first and works it after.
//
// slot numbers the claiming loop (0 for claimLoop, 1… for the txLoops): a
// plain claim is marked under it (see markKey), and only slot 0 rescues
// events whose worker died or works while the pool recovers.
func (p *Pool) runTx(claimCtx, runCtx context.Context, sources []string, strict bool, slot int) (full bool, err error) {
	limit := p.txLimit()
	recovering := !strict && p.recovering.Load() > 0
	if recovering && slot != 0 {
		// Recovery works one event at a time in the whole pool: two in
		// flight would both be charged if one killed the process.
		return false, nil
	}
	leased := strict || recovering
	if leased {
		limit = 1
	}
	// The first transaction claims and runs handlers together; what its
	// budget leaves over stays leased and runs in the next ones.
	var deadline time.Time
	ran := 0
	// The store's statements run on dbCtx, which shutdown does not cancel,
	// so outcomes of cancelled handlers are still written (unless Stop
	// abandons them: that ends dbCtx and rolls the transaction back);
	// handlers run on runCtx, which shutdown cancels after the grace
	// period.
	dbCtx := p.workCtx
	picked := false // work runs events picked without a lease (ClaimWork)
	work := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		if ran > 0 && time.Now().After(deadline) && !queue.Alone(ctx) {
			return hookbox.Outcome{} // not run: left for the next transaction
		}
		ran++
		if picked { // leased ones are counted in p.leases
			p.handling.Add(1)
			defer p.handling.Add(-1)
		}
		return p.runHandler(runCtx, tx, ev, nil)
	}
	deadline = time.Now().Add(p.opts.TxBudget)
	lease := p.lease(p.maxTimeout(sources))
	// The payloads this transaction takes count against MaxPayloadBytes
	// with those of targets and of the other transactions until it ends.
	budget, ok := p.reservePayloads()
	if !ok {
		return false, nil // the claim comes when a payload is let go
	}
	var held int64
	settle := func(evs []hookbox.Event) {
		p.settlePayloads(budget, evs)
		held, budget = payloadBytes(evs), 0
	}
	defer func() { p.releasePayloads(held + budget) }()
	params := hookbox.ClaimParams{Owner: p.owner(), Limit: limit, Lease: lease, Sources: sources, Strict: strict, MaxPayloadBytes: budget}
	if !leased {
		params.Mark = hookbox.Mark{Key: p.markKey(slot), Worker: p.id}
		// One loop rescues events whose worker died, one per claim, so
		// that no two run at once (see queue.Result.Rescued).
		params.Rescue = slot == 0
	}
	var res []queue.Result
	if leased {
		var evs []hookbox.Event
		evs, err = p.claim(claimCtx, params)
		settle(evs)
		if err != nil || len(evs) == 0 {
			if err == nil && !strict {
				p.recovering.Store(0) // nothing due: nothing left from a crash
			}
			return false, err
		}
		if !strict {
			p.recovering.Add(-int64(len(evs)))
		}
		p.leases.add(evs, lease)
		defer p.leases.remove(evs)
		res, err = p.runner.Work(dbCtx, evs, work)
		if err != nil {
			p.workFailed(dbCtx, res, err)
			return false, err
		}
	} else {
		picked = true
		res, err = p.runner.ClaimWorkPicked(dbCtx, params, settle, work)
		picked = false
		if err != nil {
			// Events worked alone before the failure have their outcomes
			// recorded (see queue.Runner.ClaimWork).
			p.reportRun(res)
			// The store failed, maybe under a handler's work, which was
			// then not counted (it was to be counted in the transaction
			// that failed): an event whose work breaks the store's
			// connection every time would run, uncounted, for ever. Claim
			// one event at a time with a committed lease for a while
			// (recovery), so each attempt counts before it runs.
			p.recover()
			return false, err
		}
		if len(res) == 0 {
			return false, nil
		}
	}
	full = len(res) == limit
	// Handlers may have queued new events (effect.RecordSend) in the
	// transaction that just committed: look for them now.
	p.Notify()
	rest, rescued := p.reportRun(res)
	if !leased {
		p.adaptTxLimit(limit, len(res), len(res)-len(rest)-len(rescued))
		// What the claiming transaction left unrun is due again, not
		// leased: the next claim, at once, picks it up.
		full = full || len(rest) > 0
		rest = nil
	}
	// Rescued events each run alone, their attempt already counted: one
	// that kills the process again is charged for it, and nothing else is.
	if len(rescued) > 0 {
		p.leases.add(rescued, lease)
		defer p.leases.remove(rescued)
	}
	for _, ev := range rescued {
		deadline, ran = time.Now().Add(p.opts.TxBudget), 0
		res, err := p.runner.Work(dbCtx, []hookbox.Event{ev}, work)
		if err != nil {
			p.workFailed(dbCtx, res, err)
			return full, err
		}
		p.reportRun(res)
	}
	for len(rest) > 0 {
		deadline, ran = time.Now().Add(p.opts.TxBudget), 0
		res, err := p.runner.Work(dbCtx, rest, work)
		if err != nil {
			p.workFailed(dbCtx, res, err)
			return full, err
		}
		p.Notify()
		rest, _ = p.reportRun(res)
	}
	return full, nil
}

// release gives back the attempt of leased events whose work the store
// could not commit (nothing of it was applied), or whose target's outcome
// it could not record (the target may have done its work: running it
// again is the at-least-once promise), due again in a second; if
// that fails too, their leases end and they are claimed again. As with an
// attempt cut short by shutdown (see released), the attempt is given back
// only when the one before it was not: a failure the event itself causes
// still uses up its attempts, and ends it dead, saying why, instead of
// leaving its last attempt to be taken for a process that died of it.
// An attempt that counts waits out its backoff, as any failed one does.
// Each outcome recorded is reported (see report), as any other attempt's.
func (p *Pool) release(ctx context.Context, evs []hookbox.Event, cause error) {
	if len(evs) == 0 {
		return
	}
	outs := make([]hookbox.Outcome, len(evs))
	now := time.Now()
	for i, ev := range evs {
		o := hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusPending,
			RetryAt: now.Add(time.Second), Error: p.errorText(storeFailedPrefix + cause.Error()), StartedAt: now, FinishedAt: now}
		switch pol := p.policy(ev.Source); {
		case !givenBack(&ev):
			o.Released = true
		case tries(&ev) >= pol.MaxAttempts:
			o.Status, o.Error = hookbox.StatusDead, p.errorText("the store failed again on the last attempt: "+cause.Error())
		default:
			o.RetryAt = now.Add(pol.Backoff(tries(&ev)))
		}
		outs[i] = o
	}
	errs, err := p.finishAgain(ctx, outs)
	if err != nil {
		p.logErr("release events after a store failure", err)
		return
	}
	for i := range evs {
		var ferr error
		if i < len(errs) {
			ferr = errs[i]
		}
		p.report(&evs[i], outs[i], ferr)
	}
}

// workFailed settles the events of a queue.Runner.Work that failed with
// cause: it reports those whose outcomes were recorded before the failure,
// and releases the others, still leased (see release).
func (p *Pool) workFailed(ctx context.Context, res []queue.Result, cause error) {
	var unrecorded []hookbox.Event
	for i := range res {
		if r := &res[i]; r.Ran() || r.Err != nil {
			p.report(&r.Event, r.Outcome, r.Err)
		} else {
			unrecorded = append(unrecorded, r.Event)
		}
	}
	p.release(ctx, unrecorded, cause)
}

// finishRetries are the waits between tries of finishAgain, and
// finishAgainBudget the time all of them together may take.
var (
	finishRetries     = []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	finishAgainBudget = time.Second
)

// finishAgain records outcomes just after the store failed: the outage
// that broke one connection (a database restart, connections terminated)
// most often breaks the next statement too, and is over a moment later.
// It tries a few times within finishAgainBudget, while the events' leases
// are still extended: one budget for all of them, not a store timeout
// each, so that a store that hangs holds a pool's Stop a second, not
// minutes. A release recorded by none of them left the events leased
// until their leases ended; claimed again, their attempt was then
// charged as one whose worker died, and a last one ended dead, though
// this process was alive and its target may have delivered.
func (p *Pool) finishAgain(ctx context.Context, outs []hookbox.Outcome) (errs []error, err error) {
	ctx, cancel := context.WithTimeout(ctx, finishAgainBudget)
	defer cancel()
	err = context.DeadlineExceeded
	for _, wait := range finishRetries {
		select {
		case <-ctx.Done():
			return errs, err
		case <-time.After(wait):
		}
		sctx, cancel := p.storeCtx(ctx)
		errs, err = p.q.Finish(sctx, outs)
		cancel()
		if err == nil {
			return errs, nil
		}
	}
	return errs, err
}

// reportRun reports the events that ran and returns those left unrun,
// still leased: rescued ones (see queue.Result) apart from the others.
func (p *Pool) reportRun(res []queue.Result) (unrun, rescued []hookbox.Event) {
	for i := range res {
		r := &res[i]
		switch {
		case !r.Ran() && r.Err == nil && r.Rescued:
			rescued = append(rescued, r.Event)
		case !r.Ran() && r.Err == nil:
			unrun = append(unrun, r.Event)
		default:
			p.report(&r.Event, r.Outcome, r.Err)
		}
	}
	return unrun, rescued
}

// charge is queue.Runner's Charge: the outcome of an attempt whose handler
// broke its transaction.
func (p *Pool) charge(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome {
	return p.outcome(ev, p.policy(ev.Source), started, err)
}

// runHandler runs the database side of ev's handler in tx and turns its
// result into an outcome: the Apply of a two-phase handler, with what its
// Prepare returned (prep), or an apply-only handler.
func (p *Pool) runHandler(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, prep *prepared) hookbox.Outcome {
	p.mu.Lock()
	r := p.routes[ev.Source]
	ph, phased, h := r.handlerFor(ev.EventType)
	pol := r.policy
	p.mu.Unlock()
	start := time.Now()
	var v any
	if prep != nil { // the attempt began with its Prepare, or its lease
		v, start = prep.value, prep.start
	}
	// On a source with a two-phase handler every event comes with prep,
	// those of an apply-only handler (Handle) too: h runs as Apply alone.
	var run func(ctx context.Context) error
	switch {
	case phased && ph.Apply != nil:
		run = func(ctx context.Context) error { return ph.Apply(ctx, tx, ev, v) }
	case h != nil:
		run = func(ctx context.Context) error { return h(ctx, tx, ev) }
	}
	if tries(ev) > pol.MaxAttempts {
		return p.outcome(ev, pol, start, p.notRun(ctx, ev, pol))
	}
	if run != nil && ctx.Err() != nil {
		// Shutdown cancelled the work before this handler began (one
		// after the running one in a shared transaction): it is not run,
		// and its attempt is given back as a cancelled one is. Run with
		// the cancelled context, its first statement could not open its
		// savepoint, which was taken for the handler breaking the
		// transaction: run alone, it was charged, and ended dead on its
		// last attempt without having run.
		err := ctx.Err()
		return p.released(ctx, ev, err, p.outcome(ev, pol, start, err))
	}
	var err error
	if run != nil {
		hctx, cancel := context.WithTimeout(ctx, pol.Timeout)
		hctx, end := p.trace(hctx, "handle", ev)
		err = call(func() error { return run(hctx) })
		if err != nil && hctx.Err() == nil && cancelledStatement(err) {
			// The database cancelled a statement of the handler's while
			// its deadline was far off: a cancel request of an earlier
			// statement of the shared transaction that reached the
			// server late (pgx can only send one and wait a moment), or
			// an operator's. Not this handler's failure: given back as a
			// conflict is, within MaxConflictsInARow.
			err = Conflict(err)
		}
		end(err)
		// Rows the handler left open are closed before its context is
		// cancelled, so that no cancel request is sent for them (see
		// hookbox.Tx.CloseRows).
		tx.CloseRows()
		cancel()
	}
	return p.released(ctx, ev, err, p.outcome(ev, pol, start, err))
}

// trace starts the span of one handler phase (Options.Trace), or nothing.
func (p *Pool) trace(ctx context.Context, phase string, ev *hookbox.Event) (context.Context, func(error)) {
	if p.opts.Trace == nil {
		return ctx, func(error) {}
	}
	return p.opts.Trace(ctx, phase, ev)
}

// tries is how many attempts ev has had since it was stored or last
// replayed: the count its retry policy applies to.
func tries(ev *hookbox.Event) int { return ev.Attempts - ev.AttemptBase }

// notRunError ends an event claimed past its last attempt without running
// it. Its outcome is NotRun (see outcome): the claim that found it counted
// an attempt that is not made, and the finish takes that count back. Its
// text says how the event got there (see notRun).
type notRunError struct{ why string }

func (e *notRunError) Error() string { return e.why }

// errUnfinished is the notRunError of an event whose last attempt's worker
// stopped before recording how it ended, most likely because the event's
// work killed the process. Running it again would kill the next one.
var errUnfinished = Permanent(&notRunError{"the last attempt's worker stopped without an outcome (the process died?); not run again"})

// notRun is the error that ends ev, claimed past its last attempt under
// pol (tries(ev) > pol.MaxAttempts), without running it. There are two
// ways there: the last attempt's worker stopped without an outcome
// (errUnfinished), or that attempt recorded a retry and pol.MaxAttempts
// was lowered (max_attempts in the config) while the event waited. The
// event's history, read only on this rare path, tells which: whether
// attempt ev.Attempts-1 has a row with the outcome applied to the event.
// When it cannot be read, the text says what is known and why no more.
func (p *Pool) notRun(ctx context.Context, ev *hookbox.Event, pol Policy) error {
	made := tries(ev) - 1
	ctx, cancel := p.storeCtx(ctx)
	defer cancel()
	as, err := p.q.Attempts(ctx, ev.ID)
	switch {
	case err != nil:
		return Permanent(&notRunError{fmt.Sprintf("max_attempts is %d and the event has made %d attempts; not run again "+
			"(whether the last one recorded an outcome could not be read: %v)", pol.MaxAttempts, made, err)})
	case !recorded(as, ev.Attempts-1):
		return errUnfinished
	}
	return Permanent(&notRunError{fmt.Sprintf("max_attempts is now %d and the event has made %d attempts; not run again "+
		"(the limit was lowered while it waited for its next attempt)", pol.MaxAttempts, made)})
}

// recorded reports whether as, an event's history, holds the outcome of
// attempt n as applied to the event: a row of that attempt (a mark is
// none) that is neither unknown nor refused (AttemptLost: the lease had
// moved on).
func recorded(as []hookbox.Attempt, n int) bool {
	for _, a := range as {
		if a.Attempt == n && a.Made() && a.Outcome != hookbox.AttemptUnknown && a.Outcome != hookbox.AttemptLost {
			return true
		}
	}
	return false
}

// prepared is an event whose Prepare phase succeeded, waiting for Apply.
type prepared struct {
	ev    hookbox.Event
	value any
	start time.Time // when the attempt started (before Prepare)
}

// applyBatch runs the Apply phase of prepared events in as few
// transactions as the store allows (queue.Runner Work).
func (p *Pool) applyBatch(ctx context.Context, in []prepared) ([]queue.Result, error) {
	byID := make(map[int64]*prepared, len(in))
	evs := make([]hookbox.Event, len(in))
	for i := range in {
		byID[in[i].ev.ID] = &in[i]
		evs[i] = in[i].ev
	}
	pos := make(map[int64]int, len(in))
	for i, ev := range evs {
		pos[ev.ID] = i
	}
	out := make([]queue.Result, len(in))
	// Neither the transactions nor the Applies in them are bounded by what
	// is left of the batch's time (ctx): each Apply has its source's
	// timeout, and a batch of slow Applies, in as many transactions as the
	// store's cap makes, would otherwise hand its last ones a context
	// already over, and their failures would send them round to Prepare
	// again. Shutdown does not cancel Applies either way, unless Stop
	// abandons them.
	ctx = p.workCtx
	work := func(_ context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		return p.runHandler(ctx, tx, ev, byID[ev.ID])
	}
	// Applies may have queued new events (effect.RecordSend) in the
	// transactions that committed, as a Go handler's may (runTx): the
	// claim loop must read the queues with events due again, or a send
	// in a queue its last answer did not list waits for the poll (the
	// event the Apply ends, done, only wakes the pool).
	defer p.Notify()
	for len(evs) > 0 {
		res, err := p.runner.Work(ctx, evs, work)
		if err != nil {
			// Outcomes recorded before the failure stand; the others fail
			// with err, and their Submits release them (deliver).
			for _, r := range res {
				if r.Ran() || r.Err != nil {
					out[pos[r.Event.ID]] = r
				}
			}
			failed := make(applyErrors, len(in))
			for i, r := range out {
				if !r.Ran() && r.Err == nil {
					failed[i] = err
				}
			}
			return out, failed
		}
		evs = evs[:0:0]
		for _, r := range res {
			if !r.Ran() && r.Err == nil {
				evs = append(evs, r.Event) // over the store's cap: next transaction
				continue
			}
			out[pos[r.Event.ID]] = r
		}
	}
	return out, nil
}

// applyErrors are the errors of a batch of Applies whose store failed part
// way (groupcommit.ItemErrors): nil for an event whose outcome was
// recorded before that.
type applyErrors []error

func (e applyErrors) Error() string {
	for _, err := range e {
		if err != nil {
			return err.Error()
		}
	}
	return "no error"
}

// ItemError is the error of the i-th Apply of the batch.
func (e applyErrors) ItemError(i int) error { return e[i] }

// released turns the failed outcome of an attempt that shutdown cancelled
// (ctx, the work's, has ended) into a release: the event is due again at
// once, for the next process, and the attempt is given back to its retry
// budget (hookbox.Outcome.Released): the work was cut short, not judged,
// and a graceful restart must not use up the attempts of the events in
// flight, nor leave one that was on its last attempt to be marked dead,
// unrun, by the next process (errUnfinished). err is what ended the
// attempt: a permanent refusal (Permanent: a 410, say) is a judgement even
// when it comes back during shutdown, and is not released; nor is an
// event refused unrun (notRunError).
//
// A release cannot repeat within one process: only Stop cancels the
// work's context, after claiming has stopped, so the pool never claims the
// event again. Across processes it can: work that makes its process stop
// (a deploy script that restarts hookbox, a handler that fails the
// liveness probe) would be cut short, given back and run again at every
// start, never reaching its last attempt. So an attempt is given back
// only when the one before it was not (ev.LastError, which the claim
// reads, says how that one ended); the next cut short in a row counts, and
// on the event's last attempt ends it dead, saying why.
func (p *Pool) released(ctx context.Context, ev *hookbox.Event, err error, o hookbox.Outcome) hookbox.Outcome {
	if ctx.Err() == nil || o.Status == hookbox.StatusDone || IsPermanent(err) {
		return o
	}
	again := givenBack(ev)
	o.Error = releasedPrefix + o.Error
	switch {
	case !again:
		o.Status, o.RetryAt, o.Released = hookbox.StatusPending, time.Now(), true
	case o.Status == hookbox.StatusPending:
		o.RetryAt = time.Now()
	default:
		o.Error = "cut short by a shutdown again (does its work stop hookbox?): " + o.Error
	}
	return o
}

// releasedPrefix starts the error of an attempt shutdown cut short,
// storeFailedPrefix that of one whose outcome the store failed to commit:
// the two kinds of attempt given back (hookbox.Outcome.Released).
const (
	releasedPrefix    = "cancelled by shutdown: "
	storeFailedPrefix = "store failed: "
)

// givenBack reports whether ev's previous attempt was given back (its
// error, which the claim reads, says so): the next one is not.
func givenBack(ev *hookbox.Event) bool {
	return strings.HasPrefix(ev.LastError, releasedPrefix) || strings.HasPrefix(ev.LastError, storeFailedPrefix)
}

// call runs fn, turning a panic into an error.
func call(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// MaxErrorText bounds the error text stored per attempt, in bytes: a
// longer one keeps its start and its end. A Target whose errors carry the
// end of a longer text (an exec command's output) keeps them within it, so
// that what is stored is one contiguous piece.
const MaxErrorText = 2048

// outcome turns an attempt's result into the transition to record.
func (p *Pool) outcome(ev *hookbox.Event, pol Policy, start time.Time, err error) hookbox.Outcome {
	now := time.Now()
	o := hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, StartedAt: start, FinishedAt: now}
	exhausted := err != nil && IsExhausted(err) && !IsPermanent(err)
	conflicts := MaxConflictsInARow // none given back unless err is a conflict
	if err != nil && !exhausted && IsConflict(err) && !IsPermanent(err) {
		conflicts = conflictsInARow(ev)
	}
	if !exhausted && p.exhaustedRun.Load() != 0 {
		p.exhaustedRun.Store(0)
	}
	switch {
	case err == nil:
		o.Status = hookbox.StatusDone
	case exhausted:
		// This process ran out of something of its own (see Exhausted):
		// the work was never judged. Given back, it waits a backoff (the
		// resource is rarely back at once) and keeps its retry budget, so
		// a host at its limits cannot walk events to dead.
		o.Status, o.Released = hookbox.StatusPending, true
		o.RetryAt = now.Add(exhaustedDelay(pol, tries(ev), p.exhaustedRun.Add(1)))
		p.errLog.Log(context.Background(), p.log, slog.LevelError, "exhausted", exhaustedLine, func() []slog.Attr {
			return []slog.Attr{slog.String("source", ev.Source), slog.Any("err", err)}
		})
		o.Error = p.errorText(exhaustedPrefix + err.Error())
		return o
	case conflicts < MaxConflictsInARow:
		// The work lost a race with another transaction (see IsConflict):
		// its writes were rolled back to its savepoint, and it runs again
		// soon, its retry budget as it was. Its error text counts the
		// conflicts in a row, as the claim reads it back (conflictsInARow).
		o.Status, o.Released = hookbox.StatusPending, true
		o.RetryAt = now.Add(conflictDelay(pol, conflicts+1))
		o.Error = p.errorText(fmt.Sprintf("%s%d in a row: %s", conflictPrefix, conflicts+1, err.Error()))
		return o
	case IsPermanent(err) || tries(ev) >= pol.MaxAttempts:
		o.Status = hookbox.StatusDead
		// Claimed past its last attempt and not run: the store takes the
		// claim's count back, so the event reads the attempts it had.
		o.NotRun = errors.As(err, new(*notRunError))
	default:
		o.Status = hookbox.StatusPending
		o.RetryAt = now.Add(pol.retryDelay(tries(ev), err))
	}
	if err != nil {
		o.Error = p.errorText(err.Error())
	}
	return o
}

// exhaustedPrefix starts the error of an attempt given back because this
// process ran out of a resource of its own (IsExhausted), and
// exhaustedLine is the line, spaced out as logErr's, that tells the
// operator so.
const (
	exhaustedPrefix = "not charged: hookbox ran out of a resource of its own: "
	exhaustedLine   = "worker: hookbox ran out of a resource of its own (open files, processes or memory); " +
		"attempts are given back and retried, not charged: raise the limit (LimitNOFILE or ulimit -n, LimitNPROC) or lower the load"
)

// conflictPrefix starts the error of an attempt given back because it
// lost a race with another transaction (IsConflict), followed by how many
// such attempts of the event there have been in a row.
const conflictPrefix = "not charged: a database conflict (deadlock, serialization failure, or a cancel not of this attempt), retried; "

// conflictsInARow is how many attempts in a row before this one of ev were
// given back for a conflict: the count its last error starts with.
func conflictsInARow(ev *hookbox.Event) int {
	rest, ok := strings.CutPrefix(ev.LastError, conflictPrefix)
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// errorText is the error text stored with an attempt: secrets masked
// (Options.Redact), then cut to MaxErrorText.
func (p *Pool) errorText(s string) string {
	if p.opts.Redact != nil {
		s = p.opts.Redact(s)
	}
	return CutText(strings.ToValidUTF8(s, "\uFFFD"), MaxErrorText)
}

// CutText keeps at most n bytes of s: its start and its end (where a
// command's last lines of output are, or the host a certificate error
// names), joined by " … " and cut on UTF-8 boundaries. It is how the
// worker cuts the error text it stores (MaxErrorText), and how a target
// bounds an error's text before it goes anywhere else (a span).
func CutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const gap = " … "
	head, tail := n/2, n-n/2-len(gap)
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return strings.ToValidUTF8(s[:head]+gap+s[start:], "")
}

// runTargets claims up to limit events for targets and starts each on a
// goroutine of its own (one kept warm, see warm). It returns how many it
// claimed.
//
// ctl, when not nil, is the Controls of the one source: the claim follows
// its order keys, and each event is counted in and out of its state.
func (p *Pool) runTargets(claimCtx, runCtx context.Context, inflight *sync.WaitGroup, sources []string, strict bool, limit int, ctl *control) (int, error) {
	lease := p.lease(p.maxTimeout(sources))
	params := hookbox.ClaimParams{Owner: p.owner(), Limit: limit, Lease: lease, Sources: sources, Strict: strict}
	var cursor string
	if ctl != nil {
		params.ByKey, params.SkipDead, params.AfterKey = ctl.ByKey, ctl.SkipDead, p.afterKey(ctl)
		params.KeyCursor, params.MaxKeys = &cursor, p.maxKeys
		if ctl.ByKey {
			params.RunningKeys = p.leases.keys(sources[0])
		}
	}
	if !strict && !params.ByKey {
		params.RunningIDs = p.leases.ids()
	}
	evs, budget, ok, err := p.claimWithinBudget(claimCtx, params)
	if !ok {
		return 0, nil // the claim comes when a payload is let go
	}
	if ctl != nil && err == nil {
		p.took(ctl, evs, time.Now(), cursor)
	}
	if err == nil && !strict && !params.ByKey && len(evs) < limit && !p.payloadBound(budget, evs) {
		p.claimedShort(sources...)
	}
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	p.startTargets(runCtx, inflight, evs, lease, func(string) *control { return ctl })
	return len(evs), nil
}

// runTargetsEach claims, in one claim (hookbox.ClaimParams.Limits), up
// to limits[i] events of each queue units[i] and up to total in all, and
// starts them as runTargets does. It returns how many it claimed of
// each. The queues share one lease, the longest of theirs: callers group
// them by lease. A route with Controls must allow limits[i] (allowance),
// and must not claim by key (a claim of its own).
func (p *Pool) runTargetsEach(claimCtx, runCtx context.Context, inflight *sync.WaitGroup, units []claimUnit, limits []int, total int) ([]int, error) {
	got := make([]int, len(units))
	sources := make([]string, len(units))
	for i, u := range units {
		sources[i] = u.name
	}
	lease := p.lease(p.maxTimeout(sources))
	params := hookbox.ClaimParams{Owner: p.owner(), Limit: total, Limits: limits, Lease: lease, Sources: sources,
		RunningIDs: p.leases.ids()}
	evs, budget, ok, err := p.claimWithinBudget(claimCtx, params)
	if !ok {
		return got, nil // the claim comes when a payload is let go
	}
	if err != nil {
		return got, err
	}
	at := make(map[string]int, len(units))
	for i, u := range units {
		at[u.name] = i
	}
	var ofCtl map[string][]hookbox.Event // each route's events, for its Controls
	for _, ev := range evs {
		i := at[ev.Source]
		got[i]++
		if units[i].ctl != nil {
			if ofCtl == nil {
				ofCtl = map[string][]hookbox.Event{}
			}
			ofCtl[ev.Source] = append(ofCtl[ev.Source], ev)
		}
	}
	if len(evs) < total && !p.payloadBound(budget, evs) {
		for i, u := range units {
			if got[i] < limits[i] {
				p.claimedShort(u.name)
			}
		}
	}
	now := time.Now()
	for _, u := range units {
		if u.ctl != nil {
			p.took(u.ctl, ofCtl[u.name], now, "")
		}
	}
	if len(evs) > 0 {
		p.startTargets(runCtx, inflight, evs, lease, func(source string) *control { return units[at[source]].ctl })
	}
	return got, nil
}

// payloadBound reports whether a claim within budget payload bytes
// (claimWithinBudget; 0: no bound) that took evs may have stopped short
// at that bound rather than for want of events: less than a quarter of
// what the pool may hold at once was left after it.
func (p *Pool) payloadBound(budget int64, evs []hookbox.Event) bool {
	return budget > 0 && budget-payloadBytes(evs) < p.opts.MaxPayloadBytes/4
}

// claimWithinBudget claims params for targets within what is left of the
// payload account (reservePayloads), keeping what the events it got
// hold (settlePayloads), and returns the bytes it claimed within (0: no
// bound). ok is false, with nothing claimed, when nothing is left: the
// claim comes again when a payload is let go.
func (p *Pool) claimWithinBudget(ctx context.Context, params hookbox.ClaimParams) (evs []hookbox.Event, budget int64, ok bool, err error) {
	budget, ok = p.reservePayloads()
	if !ok {
		return nil, 0, false, nil
	}
	params.MaxPayloadBytes = budget
	evs, err = p.claim(ctx, params)
	p.settlePayloads(budget, evs)
	return evs, budget, true, err
}

// startTargets starts each of evs, claimed with lease, on a goroutine of
// its own (one kept warm, see warm), each in a slot (Concurrency). ctlOf
// names the Controls of an event's queue (nil: none), which count each
// event in and out of their state.
func (p *Pool) startTargets(runCtx context.Context, inflight *sync.WaitGroup, evs []hookbox.Event, lease time.Duration, ctlOf func(source string) *control) {
	p.leases.add(evs, lease)
	for i := range evs {
		// Each event runs on a copy of its own, and leaves the claim's
		// slice: that slice, kept by one goroutine of the batch (or by
		// this loop, waiting for a slot), would keep every payload of the
		// batch, those of events long finished included (see deliver).
		ev := new(hookbox.Event)
		*ev, evs[i] = evs[i], hookbox.Event{}
		ctl := ctlOf(ev.Source)
		// The payload counts against MaxPayloadBytes until the work lets
		// it go: a target's once it returns (deliver drops it), a
		// two-phase handler's once its Apply has run.
		held := int64(len(ev.Payload))
		letGo := func() {
			p.releasePayloads(held)
			held = 0
		}
		round := p.takeSlot(ev.Source)
		inflight.Add(1)
		p.warm.run(func() {
			defer inflight.Done()
			// The slot bounds the work running (Concurrency); once the work
			// returns, the slot goes to the next event while this outcome
			// commits, so that deliveries do not wait for the commit (on
			// SQLite, queued behind ingest's on the one writer). The event
			// keeps its lease, and stays processing in the store, until the
			// outcome is committed. recording bounds the outcomes waiting
			// for their commit, so claimed events never exceed twice
			// Concurrency.
			working, accounted := true, false
			worked := func(o *hookbox.Outcome, refused bool) {
				// Controls learn the outcome before the slot is freed, so
				// that the claim it wakes sees the circuit as this attempt
				// leaves it; an outcome an Apply decides (o == nil) is
				// counted once committed.
				if ctl != nil && o != nil {
					p.ended(ctl, ev.ID, *o, refused)
					accounted = true
				}
				p.recording <- struct{}{}
				working = false
				if ev.Payload == nil {
					letGo()
				}
				p.freeSlot(ev.Source, round)
				p.wakeUp()
			}
			var o hookbox.Outcome
			defer func() {
				letGo()
				if working {
					p.freeSlot(ev.Source, round)
				} else {
					<-p.recording
				}
				// Again once the outcome is committed: a strict source or an
				// order key may have been waiting for this event to finish.
				// An event neither done nor dead (a retry, an attempt given
				// back, due at once) may make its queue due again.
				if o.Status == hookbox.StatusDone || o.Status == hookbox.StatusDead {
					p.wakeUp()
				} else {
					p.Notify()
				}
			}()
			// By id: a copy of the event, bound now, would keep its
			// payload until the goroutine ends.
			defer func() { p.leases.remove([]hookbox.Event{{ID: ev.ID}}) }()
			var refused bool
			o, refused = p.deliver(runCtx, ev, worked)
			if ctl != nil && !accounted {
				p.ended(ctl, ev.ID, o, refused)
			}
		})
	}
}

// takeSlot takes one of the slots (Concurrency) for work of queue, and
// returns the round of the claim loop it was taken in (newRound), for
// freeSlot.
func (p *Pool) takeSlot(queue string) uint64 {
	p.slots <- struct{}{}
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	p.slotsBy[queue]++
	p.slotsHeld++
	p.slotsNew[0]++
	return p.slotRound
}

// freeSlot gives back a slot takeSlot took for queue in round.
func (p *Pool) freeSlot(queue string, round uint64) {
	p.slotMu.Lock()
	if p.slotsBy[queue]--; p.slotsBy[queue] == 0 {
		delete(p.slotsBy, queue)
	}
	p.slotsHeld--
	if age := p.slotRound - round; age < 2 {
		p.slotsNew[age]--
	}
	p.slotMu.Unlock()
	<-p.slots
}

// slotsByQueue counts the slots each queue holds: its work running now,
// not its outcomes still being recorded, which hold their leases but no
// slot.
func (p *Pool) slotsByQueue() map[string]int {
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	return maps.Clone(p.slotsBy)
}

// deliver runs ev's work outside any transaction, under its lease: a
// Target, or the Prepare phase of a two-phase handler followed by its Apply
// in a shared transaction. Then it records the outcome, and returns it
// (an empty one when none was recorded), and whether the work ended with
// a permanent refusal (Permanent: a 410, say). It calls worked once the
// work has returned, before the outcome is committed: with the outcome
// and whether it is such a refusal, or with nil when an Apply is still
// to decide it.
func (p *Pool) deliver(ctx context.Context, ev *hookbox.Event, worked func(o *hookbox.Outcome, refused bool)) (hookbox.Outcome, bool) {
	p.mu.Lock()
	r := p.routes[ev.Source]
	ph, phased, _ := r.handlerFor(ev.EventType)
	p.mu.Unlock()
	start := time.Now()
	var value any
	var err error
	attemptCtx, cancel := context.WithTimeout(ctx, r.policy.Timeout)
	switch {
	case tries(ev) > r.policy.MaxAttempts:
		err = p.notRun(ctx, ev, r.policy)
	case r.target != nil:
		err = call(func() error { return r.target.Deliver(attemptCtx, ev) })
	case phased && ph.Prepare != nil:
		pctx, end := p.trace(attemptCtx, "prepare", ev)
		err = call(func() error {
			var err error
			value, err = ph.Prepare(pctx, ev)
			return err
		})
		end(err)
	}
	cancel()
	if r.target != nil {
		// The target is done with the payload: let it go now rather than
		// once the outcome is recorded, which may wait for the other
		// deliveries of the batch (FinishWait) and for the store. ev is
		// this delivery's own copy (see runTargets).
		ev.Payload = nil
	}
	if p.abandoned() {
		return hookbox.Outcome{}, false // left leased, see Stop
	}
	if r.target == nil && err == nil {
		worked(nil, false)
		res, err := p.apply.Submit(p.workCtx, prepared{ev: *ev, value: value, start: start})
		if err != nil {
			if p.abandoned() {
				return hookbox.Outcome{}, false // left leased, see Stop
			}
			p.logEventErr("apply", ev, err)
			p.release(p.workCtx, []hookbox.Event{*ev}, err)
			return hookbox.Outcome{}, false
		}
		p.report(ev, res.Outcome, res.Err)
		return res.Outcome, false
	}
	refused := err != nil && IsPermanent(err)
	o := p.released(ctx, ev, err, p.outcome(ev, r.policy, start, err))
	worked(&o, refused)
	ferr, err := p.finish.Submit(p.workCtx, o)
	if err != nil && p.abandoned() {
		return hookbox.Outcome{}, false // left leased, see Stop
	}
	if err != nil {
		// The store failed under the outcome's batch: try it alone.
		ferrs, ierr := p.finishAgain(p.workCtx, []hookbox.Outcome{o})
		if ierr == nil {
			if len(ferrs) > 0 {
				ferr = ferrs[0]
			}
			p.report(ev, o, ferr)
			return o, refused
		}
	}
	if err != nil {
		// Nothing of the outcome was recorded: give the attempt back, as
		// when an Apply cannot commit. Left leased, the event was claimed
		// again once its lease ended, and its last attempt, though it may
		// have delivered, was charged as one whose worker died.
		p.logEventErr("record outcome", ev, err)
		p.release(p.workCtx, []hookbox.Event{*ev}, err)
		return hookbox.Outcome{}, false
	}
	p.report(ev, o, ferr)
	return o, refused
}

// finishBatch writes outcomes of concurrent targets in one transaction.
func (p *Pool) finishBatch(ctx context.Context, outs []hookbox.Outcome) ([]error, error) {
	// Abandoned work records nothing (see Stop), and a batch still
	// waiting on the store would hold Stop for its StoreTimeout.
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(p.workCtx, cancel)()
	defer cancel()
	return p.q.Finish(ctx, outs)
}

// report logs and counts a recorded attempt.
func (p *Pool) report(ev *hookbox.Event, o hookbox.Outcome, err error) {
	switch {
	case errors.Is(err, hookbox.ErrLeaseLost):
		p.log.Warn("attempt refused: lease lost", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt)
	case o.Status == hookbox.StatusDead:
		attrs := []any{"event_id", ev.ID, "source", ev.Source, "attempt", o.AttemptsAfter(), "err", o.Error}
		if ev.OrderKey != "" {
			// A dead delivery holds its order key unless its target has
			// on_dead: skip: the key's later deliveries wait until it is
			// replayed and succeeds, or skipped (hookbox events skip).
			c := p.control(ev.Source)
			holds := c == nil || !c.SkipDead
			attrs = append(attrs, "order_key", ev.OrderKey, "holds_key", holds)
		}
		p.log.Error("event dead", attrs...)
	case o.AttemptOutcome() == hookbox.AttemptReleased && strings.HasPrefix(o.Error, storeFailedPrefix):
		// The store failed to record the attempt (see release), which the
		// line of that failure says: the event is due again in a second.
		p.log.Info("released after a store failure", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt, "err", o.Error)
	case o.AttemptOutcome() == hookbox.AttemptReleased && strings.HasPrefix(o.Error, exhaustedPrefix):
		// Said, spaced out, by exhaustedLine when the outcome was made.
		p.log.Debug("released: hookbox ran out of a resource", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt,
			"retry_in", max(0, time.Until(o.RetryAt)).Round(time.Millisecond), "err", o.Error)
	case o.AttemptOutcome() == hookbox.AttemptReleased && strings.HasPrefix(o.Error, conflictPrefix):
		// Lost a race with another transaction (see IsConflict): the
		// event is due again in a moment, sooner than the next poll may
		// come, so the pool wakes for it.
		wait := max(0, time.Until(o.RetryAt))
		p.log.Info("given back: database conflict", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt,
			"retry_in", wait.Round(time.Millisecond), "err", o.Error)
		time.AfterFunc(wait, p.Notify)
	case o.AttemptOutcome() == hookbox.AttemptReleased:
		// Shutdown cut the work short and gave the attempt back: nothing
		// failed, and the event is due at once for the next process, so a
		// warning with a retry delay (one already past) would mislead.
		p.log.Info("released at shutdown", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt, "err", o.Error)
	case o.Status == hookbox.StatusPending:
		// A second attempt in a row cut short by shutdown counts, and is
		// due now: its RetryAt is already past by the time it is logged.
		p.log.Warn("attempt failed", "event_id", ev.ID, "source", ev.Source, "attempt", o.Attempt,
			"retry_in", max(0, time.Until(o.RetryAt)).Round(time.Millisecond), "err", o.Error)
	}
	if p.opts.OnAttempt != nil {
		p.opts.OnAttempt(ev, o, err)
	}
}

// fillKeysEvery is the least time between two rounds of fillKeys. A round
// also waits a hundred times as long as the last one took: it reads every
// unfinished delivery of the ordered queues, and on a queue of millions
// that read must stay a small part of the database's time.
const fillKeysEvery = 10 * time.Second

// fillKeysLoop runs fillKeys over the ordered queues with an event due
// (dueOrdered) at Start and then every fillKeysEvery or more, until ctx
// ends.
func (p *Pool) fillKeysLoop(ctx context.Context, queues []string) {
	wait := func(took time.Duration) time.Duration { return max(fillKeysEvery, 100*took) }
	if every := p.opts.fillKeysEvery; every > 0 {
		wait = func(time.Duration) time.Duration { return every }
	}
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		start := time.Now()
		for _, q := range p.dueOrdered(ctx, queues) {
			p.fillKeys(ctx, q)
		}
		next.Reset(wait(time.Since(start)))
	}
}

// dueOrdered keeps, of the ordered queues, those with an event due
// (hookbox.Queue.DueQueues): a delivery without an order key needs one
// only once a claim could take it, and a claim takes only what is due.
// One read a round then costs what a read per ordered queue cost, each
// of the queue's unfinished deliveries, for the queues with none: an idle
// serve with 588 ordered targets sent 588 reads a round. A queue whose
// keyless delivery waits for its retry (or runs in another process) is
// keyed in the first round after it comes due. Below dueProbeMin queues,
// or when the read fails, every queue is kept, as without it.
func (p *Pool) dueOrdered(ctx context.Context, queues []string) []string {
	if len(queues) < dueProbeMin {
		return queues
	}
	sctx, cancel := context.WithTimeout(ctx, dueProbeWait)
	names, err := p.q.DueQueues(sctx)
	cancel()
	p.logErr("list the ordered queues with events due", err)
	if err != nil {
		return queues
	}
	due := make(map[string]bool, len(names))
	for _, n := range names {
		due[n] = true
	}
	return slices.DeleteFunc(slices.Clone(queues), func(q string) bool { return !due[q] })
}

// fillKeys gives the unfinished deliveries of the ordered queue q that
// have no order key the key routing gives a delivery without the value
// (routing.NoValueKey): a claim by key takes only deliveries with a key,
// and these would wait, pending, for ever. Such a delivery was stored
// before its target had order_by (a retry waiting, one dead and replayed
// since), or by a process that runs an older config (a rolling deploy);
// no order was promised for it, so it waits for no other and holds up
// none. (Giving it the key its payload would give it now could make the
// target's newer deliveries of that key, already under way, wait behind
// an old one's retries, or behind it dead.) A claim cannot find them
// itself: no index holds them apart from the keyless deliveries of
// every unordered queue, and reading the queue's unfinished deliveries
// on every claim would make each claim cost the queue's length.
func (p *Pool) fillKeys(ctx context.Context, q string) {
	sctx, cancel := p.storeCtx(ctx)
	n, err := p.q.FillOrderKeys(sctx, q, routing.NoValueKey)
	cancel()
	p.logErr("give order keys to deliveries stored without one", err)
	if n > 0 {
		p.log.Warn("worker: deliveries of an ordered target had no order key (stored before it had order_by, or by a process whose config has none); each got a key of its own, and they run without waiting for others",
			"queue", q, "deliveries", n)
		p.Notify()
	}
}

// checkOrdered refuses a route that must run its events one order key at
// a time (Controls.ByKey) but has only apply-only handlers: those run
// several events to a transaction, picked without leases, and would
// ignore the order silently.
func (p *Pool) checkOrdered() error {
	var ordered []string
	p.ctlMu.Lock()
	for name, c := range p.controls {
		if c.ByKey {
			ordered = append(ordered, name)
		}
	}
	p.ctlMu.Unlock()
	slices.Sort(ordered)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range ordered {
		if r := p.routes[name]; r != nil && !r.leased() && len(r.handlers) > 0 {
			return fmt.Errorf("worker: %s runs one event per order key at a time (order_by), which apply-only handlers (Handle) cannot: register its handler with HandlePhases, or remove order_by", name)
		}
	}
	return nil
}

// extendLoop keeps the pool's record fresh (finding pools that died, see
// Start) and the leases of running work alive: every third of the
// shortest lease, or recordRefresh if that is sooner, each claim's events
// are extended by that claim's own lease length, so a source with a long
// timeout does not stretch the leases of the others (which a crash would
// then leave locked longer). The record is refreshed on a goroutine of
// its own, kicked each round, so that a refresh held up cannot hold back
// the extensions.
//
// A round in which a call failed (the database unreachable) is tried
// again after extendRetry instead of a third of a lease: a lease then
// outlives an outage that ends with a little of it left, rather than one
// shorter than a third of it, which matters where another process would
// take the events whose leases ended.
func (p *Pool) extendLoop(ctx context.Context) {
	refresh := p.opts.recordRefresh
	if refresh <= 0 {
		refresh = recordRefresh
	}
	every := min(p.shortestLease/3, refresh)
	retry := extendRetry(every)
	// A refresh may wait (for a lock on the workers table, a connection
	// that stopped answering, up to StoreTimeout) far longer than the
	// shortest lease.
	kick := make(chan struct{}, 1)
	var refreshFailed atomic.Bool
	var refresher sync.WaitGroup
	refresher.Add(1)
	go func() {
		defer refresher.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			if !p.refreshRecord(ctx) {
				refreshFailed.Store(true)
			}
		}
	}()
	defer refresher.Wait()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case kick <- struct{}{}:
		default: // a refresh is still waiting to run
		}
		began, next := time.Now(), every
		if !p.extendRound(ctx) || refreshFailed.Swap(false) {
			next = retry
		}
		t.Reset(max(0, next-time.Since(began)))
	}
}

// refreshRecord refreshes the pool's record, charging what pools found
// dead were running, and reports whether the refresh reached the
// database.
func (p *Pool) refreshRecord(ctx context.Context) bool {
	sctx, cancel := p.storeCtx(ctx)
	dead, err := p.q.WorkerSeen(sctx, p.id, p.staleAfter())
	cancel()
	p.logErr("refresh the pool's record", err)
	if err != nil {
		return false
	}
	if dead > 0 {
		p.log.Warn("worker: a pool stopped without a trace; working its events one at a time", "pools", dead)
		p.recover()
	}
	// At every refresh, not only when this one found a pool dead: a dead
	// pool's mark whose event a transaction still held was kept (see
	// queue.Runner.Recover), and another pool may have deleted the record.
	p.chargeOrphans(ctx)
	return true
}

// extendRetry is how soon a failed round of extensions is tried again,
// given the interval between rounds: a quarter of it, at most a second.
func extendRetry(every time.Duration) time.Duration { return min(time.Second, every/4) }

// extendRound extends every claim's leases, and reports whether all of
// it reached the database.
func (p *Pool) extendRound(ctx context.Context) bool {
	ok := true
	for owner, held := range p.leases.byOwner() {
		// Each from its own call: one that waited (for SQLite's writer,
		// a lock) must not shorten the leases extended after it.
		sctx, cancel := p.storeCtx(ctx)
		err := p.q.ExtendLeases(sctx, owner, held.ids, time.Now().Add(held.lease))
		cancel()
		p.logErr("extend leases", err)
		if err != nil {
			ok = false
		}
	}
	return ok
}

// leaseSet tracks the events this pool is working: their lease owners,
// and their queues and order keys, which is what the pool knows better
// than the store: a lease can end while its event still runs (extensions
// that could not reach the database in time), and the store would then
// hand the event, or the next of its key, out again.
type leaseSet struct {
	mu     sync.Mutex
	owners map[int64]heldEvent      // event id → what it is
	leases map[string]time.Duration // lease owner → the claim's lease length
}

// heldEvent is an event the pool works: its lease owner, queue and order
// key.
type heldEvent struct{ owner, queue, key string }

// heldLeases are the events one claim still holds.
type heldLeases struct {
	ids   []int64
	lease time.Duration
}

func (l *leaseSet) add(evs []hookbox.Event, lease time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.owners[e.ID] = heldEvent{owner: e.LeaseOwner, queue: e.Source, key: e.OrderKey}
		l.leases[e.LeaseOwner] = lease
	}
}

func (l *leaseSet) remove(evs []hookbox.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		delete(l.owners, e.ID)
	}
}

// runs reports whether the pool runs an event of queue.
func (l *leaseSet) runs(queue string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.owners {
		if w.queue == queue {
			return true
		}
	}
	return false
}

// ids are the events the pool runs, of any queue.
func (l *leaseSet) ids() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.owners))
	for id := range l.owners {
		out = append(out, id)
	}
	return out
}

// keys are the order keys of queue the pool runs an event of (a key
// more than once when several run).
func (l *leaseSet) keys(queue string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.owners {
		if w.queue == queue && w.key != "" {
			out = append(out, w.key)
		}
	}
	return out
}

func (l *leaseSet) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.owners)
}

func (l *leaseSet) byOwner() map[string]heldLeases {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]heldLeases{}
	for id, w := range l.owners {
		h := out[w.owner]
		h.ids, h.lease = append(h.ids, id), l.leases[w.owner]
		out[w.owner] = h
	}
	for owner := range l.leases {
		if _, ok := out[owner]; !ok {
			delete(l.leases, owner) // the claim's events are all finished
		}
	}
	return out
}
