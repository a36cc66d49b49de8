// Package groupcommit shares one transaction among many concurrent callers.
//
// With synchronous=FULL every SQLite commit is a disk sync, and a PostgreSQL
// commit is a WAL flush: a few thousand per second at most. A Committer lets
// concurrent callers Submit items; a flusher takes every item waiting (up to
// MaxBatch) and hands them to one function call, typically one transaction.
// While that call runs, the next batch gathers, so batches grow with load
// without a timer adding latency when the system is idle.
//
// NewPipelined is the mode for stores that can keep a transaction open
// (hookbox.IngestTx): one goroutine adds whatever arrives to an open
// transaction while another commits the previous one, and the open one is
// committed the moment that commit returns. A delivery arriving while a
// commit is in flight is therefore in the very next one, and each commit
// carries everything that arrived during the last.
//
// Guarantees: Submit returns the output for its own item only after the
// function call that held it returned (pipelined: after its transaction's
// Commit returned, and as the transaction reports it then); if that
// failed, every Submit in the batch gets the error, unless the error is
// an ItemErrors, which fails only the items it names. No item is dropped
// silently: after Close, Submit fails with ErrClosed and items already
// queued are still flushed. A Submit whose ctx ends returns at once, but
// its item stays queued or in its batch; a Hold that ctx carries
// (WithHold) is held until that batch has finished, so what the item
// keeps in memory stays counted (the server's body budget).
//
// Failures answer fast. When a pipelined transaction cannot begin, add or
// commit, every caller in it and every caller queued at that moment gets
// the error at once, and a failed commit also fails the transaction
// filling behind it: none of them waits for a Begin or a Commit of its own
// against a store that just failed.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("groupcommit: closed")

// Func processes one batch and returns one output per input, in order.
type Func[In, Out any] func(ctx context.Context, in []In) ([]Out, error)

// Options tune batching. The zero value is a sane default.
type Options struct {
	// MaxBatch caps the items in one call (default 512).
	MaxBatch int
	// MaxWait lets a flusher wait this long for more items after the first
	// one arrives (default 0: take what is waiting and go). A small wait only
	// helps when commits are cheap relative to arrivals.
	MaxWait time.Duration
	// MoreComing, if set, says whether more items are on their way; with
	// MaxWait, the flusher waits for more only while it reports true, and
	// goes with what it has as soon as it reports false. Nil: always wait.
	MoreComing func() bool
	// Flushers is how many batches may run at once (default 1). SQLite has
	// one writer, so one is right there; PostgreSQL gains from a few.
	Flushers int
	// Timeout bounds one call of the function (default 30s).
	Timeout time.Duration
	// OnBatch, if set, is called after each call with the batch size and how
	// long the call took (for metrics).
	OnBatch func(size int, took time.Duration, err error)
}

// Txn is an open transaction that batches are added to until it is
// committed; see NewPipelined.
type Txn[In, Out any] interface {
	// Add processes in inside the transaction and returns one output per
	// input, in order. Outputs are promised only once Commit returns nil,
	// and are read then: a Txn that redoes its work (after a deadlock) may
	// rewrite the slices Add returned until Commit returns.
	Add(ctx context.Context, in []In) ([]Out, error)
	// Commit ends the transaction; when it returns nil, the outputs of
	// every Add hold.
	Commit(ctx context.Context) error
	// Rollback abandons the transaction. It should return within a short
	// bound also when the store stopped answering (closing the connection
	// ends a transaction just as well): the callers that arrive meanwhile
	// wait for it.
	Rollback() error
}

// ItemErrors is an error a Func or Txn.Add may return, with its outputs, to
// refuse some items and keep the rest: ItemError(i) is the error of the
// i-th item of that call, or nil for an item whose output holds (once
// Commit returns nil, for a Txn). The transaction stays usable.
type ItemErrors interface {
	error
	ItemError(i int) error
}

// BeginFunc opens a transaction for NewPipelined.
type BeginFunc[In, Out any] func(ctx context.Context) (Txn[In, Out], error)

// withDefaults fills in the defaults the Options comments promise.
func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.Flushers <= 0 {
		o.Flushers = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return o
}

type result[Out any] struct {
	out Out
	err error
}

type request[In, Out any] struct {
	in   In
	done chan result[Out]
	hold *Hold // from Submit's ctx (WithHold), or nil
}

// reply lets go of r's Hold, then answers r's caller: the batch that held
// r is over, whether or not its caller still waits. Letting go first means
// a caller that gets its answer holds the Hold alone, and its Release
// gives back at once.
func (r request[In, Out]) reply(res result[Out]) {
	if r.hold != nil {
		r.hold.drop()
	}
	r.done <- res
}

// Committer batches concurrent submissions; see the package comment.
type Committer[In, Out any] struct {
	fn   Func[In, Out]
	opts Options
	reqs chan request[In, Out]

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	wg     sync.WaitGroup

	// Pipelined mode only.
	begin   BeginFunc[In, Out]
	idle    chan idleToken       // holds a token while no commit runs
	commits chan filled[In, Out] // the filler hands over a transaction
}

// idleToken says that no commit runs; err is the error of the commit that
// just ended, if it failed, and at when it ended.
type idleToken struct {
	err error
	at  time.Time
}

// filled is a transaction ready to commit, with the callers it holds.
type filled[In, Out any] struct {
	tx     Txn[In, Out]
	batch  []request[In, Out]
	adds   []added[Out] // one per Add, in order, covering batch[:added]
	added  int
	cancel context.CancelFunc
	ctx    context.Context
	start  time.Time
}

// added is what one Add returned: outputs read after Commit, and the
// errors of the items it refused.
type added[Out any] struct {
	outs []Out
	errs ItemErrors // nil when every item holds
}

// New starts a Committer that calls fn for each batch.
func New[In, Out any](fn Func[In, Out], opts Options) *Committer[In, Out] {
	opts = opts.withDefaults()
	c := &Committer[In, Out]{
		fn:   fn,
		opts: opts,
		reqs: make(chan request[In, Out], opts.MaxBatch*opts.Flushers),
	}
	c.wg.Add(opts.Flushers)
	for range opts.Flushers {
		go c.flusher()
	}
	return c
}

// NewPipelined starts a Committer that keeps one transaction open (see
// the package comment). Options.Flushers and MaxWait do not apply; MaxBatch
// caps the items in one transaction.
func NewPipelined[In, Out any](begin BeginFunc[In, Out], opts Options) *Committer[In, Out] {
	opts = opts.withDefaults()
	c := &Committer[In, Out]{
		opts:    opts,
		reqs:    make(chan request[In, Out], opts.MaxBatch),
		begin:   begin,
		idle:    make(chan idleToken, 1),
		commits: make(chan filled[In, Out]),
	}
	c.idle <- idleToken{}
	c.wg.Add(2)
	go c.filler()
	go c.committer()
	return c
}

// Submit queues in and waits for the batch holding it to be processed. If
// ctx ends first, Submit returns ctx's error, but the item may still be
// processed: a Hold that ctx carries (WithHold) is held until the batch
// holding the item has finished, or from no moment on if the item was
// never queued.
func (c *Committer[In, Out]) Submit(ctx context.Context, in In) (Out, error) {
	var zero Out
	done := make(chan result[Out], 1)
	hold := holdOf(ctx)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return zero, ErrClosed
	}
	if hold != nil {
		hold.take() // before the flusher can see the item (and reply)
	}
	select {
	case c.reqs <- request[In, Out]{in: in, done: done, hold: hold}:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		if hold != nil {
			hold.drop() // never queued: its maker's part still holds it
		}
		return zero, ctx.Err()
	}
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Close stops accepting items, flushes what is queued and waits for the
// flushers to finish.
func (c *Committer[In, Out]) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Committer[In, Out]) flusher() {
	defer c.wg.Done()
	batch := make([]request[In, Out], 0, c.opts.MaxBatch)
	ins := make([]In, 0, c.opts.MaxBatch)
	for {
		first, ok := <-c.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		batch = c.gather(batch)
		ins = ins[:0]
		for _, r := range batch {
			ins = append(ins, r.in)
		}
		c.run(batch, ins)
		clear(batch) // drop references for the garbage collector
		clear(ins)
	}
}

// filler opens a transaction when work arrives and adds to it whatever
// arrives until the committer is idle, then hands it over.
func (c *Committer[In, Out]) filler() {
	defer c.wg.Done()
	defer close(c.commits)
	for {
		first, ok := <-c.reqs
		if !ok {
			return
		}
		if !c.fill(first) {
			return
		}
	}
}

// fill runs one transaction from first to its hand-over; it reports false
// once Close has been called and the queue is empty.
func (c *Committer[In, Out]) fill(first request[In, Out]) (open bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	f := filled[In, Out]{ctx: ctx, cancel: cancel, start: time.Now()}
	f.batch = append(make([]request[In, Out], 0, 64), first)
	tx, err := c.callBegin(ctx)
	if err != nil {
		return c.failAll(f, err)
	}
	f.tx = tx
	open = true
	idle := false
	// takeIdle waits for the committer's token; a commit that failed after
	// this transaction began fails it too (the store just failed: its
	// callers should hear so now, not after a commit of their own).
	takeIdle := func(tok idleToken) bool {
		if tok.err != nil && f.start.Before(tok.at) {
			open = c.abandon(f, tx, tok.err, true)
			return false
		}
		idle = true
		return true
	}
	for {
		if open {
			f.batch, open = c.takeWaiting(f.batch)
		}
		last := idle || !open || len(f.batch) >= c.opts.MaxBatch
		// Adding in slices of addEvery keeps most of the work off the
		// commit's critical path without paying per-statement costs for
		// every single arrival.
		if n := f.added; len(f.batch) > n && (last || len(f.batch)-n >= addEvery) {
			ins := make([]In, 0, len(f.batch)-n)
			for _, r := range f.batch[n:] {
				ins = append(ins, r.in)
			}
			outs, err := c.callAdd(ctx, tx, ins)
			var itemErrs ItemErrors
			if errors.As(err, &itemErrs) {
				err = nil
			}
			if err == nil && len(outs) != len(ins) {
				err = fmt.Errorf("groupcommit: Add returned %d results for %d items", len(outs), len(ins))
			}
			if err != nil {
				return c.abandon(f, tx, err, idle) && open
			}
			f.adds = append(f.adds, added[Out]{outs: outs, errs: itemErrs})
			f.added = len(f.batch)
		}
		if last {
			if !idle && !takeIdle(<-c.idle) {
				return open
			}
			break
		}
		select {
		case tok := <-c.idle:
			if !takeIdle(tok) {
				return open
			}
		case r, ok := <-c.reqs:
			if ok {
				f.batch = append(f.batch, r)
			} else {
				open = false
			}
		}
	}
	c.commits <- f
	return open
}

// addEvery is how many items a pipelined transaction gathers before adding
// them while the previous commit still runs.
const addEvery = 16

// takeWaiting appends what is queued, up to MaxBatch, without waiting; it
// reports false if the queue is closed and empty.
func (c *Committer[In, Out]) takeWaiting(batch []request[In, Out]) ([]request[In, Out], bool) {
	for len(batch) < c.opts.MaxBatch {
		select {
		case r, ok := <-c.reqs:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
		default:
			return batch, true
		}
	}
	return batch, true
}

// abandon gives up f's transaction: it answers f's callers, and those
// queued, with err first, then rolls tx back, and gives back the
// committer's token if the filler held it (idle). Callers never wait for
// the rollback: against a server that stopped answering it lasts as long
// as the store lets it (see Txn.Rollback).
func (c *Committer[In, Out]) abandon(f filled[In, Out], tx Txn[In, Out], err error, idle bool) (open bool) {
	open = c.failAll(f, err)
	tx.Rollback()
	if idle {
		c.idle <- idleToken{} // no commit: the committer stays idle
	}
	return open
}

// failAll answers every caller of f and every caller queued at this
// moment with err, so that none of them waits for a Begin of its own
// against a store that just failed. It reports false once Close has been
// called and the queue is empty.
func (c *Committer[In, Out]) failAll(f filled[In, Out], err error) (open bool) {
	f.cancel()
	open = true
	// Take what is queued now, and no more than twice the queue's
	// capacity, so steady arrivals cannot keep this loop going.
drain:
	for range 2 * cap(c.reqs) {
		select {
		case r, ok := <-c.reqs:
			if !ok {
				open = false
				break drain
			}
			f.batch = append(f.batch, r)
		default:
			break drain
		}
	}
	if c.opts.OnBatch != nil {
		c.opts.OnBatch(len(f.batch), time.Since(f.start), err)
	}
	for _, r := range f.batch {
		r.reply(result[Out]{err: err})
	}
	return open
}

// committer commits each transaction handed over and answers its callers,
// then signals that it is idle.
func (c *Committer[In, Out]) committer() {
	defer c.wg.Done()
	for f := range c.commits {
		err := c.callCommit(f.ctx, f.tx)
		f.cancel()
		if c.opts.OnBatch != nil {
			c.opts.OnBatch(len(f.batch), time.Since(f.start), err)
		}
		answerAdds(f.batch, f.adds, err)
		c.idle <- idleToken{err: err, at: time.Now()}
	}
}

func (c *Committer[In, Out]) callBegin(ctx context.Context) (tx Txn[In, Out], err error) {
	defer recoverInto(&err, "Begin")
	return c.begin(ctx)
}

func (c *Committer[In, Out]) callAdd(ctx context.Context, tx Txn[In, Out], ins []In) (outs []Out, err error) {
	defer recoverInto(&err, "Add")
	return tx.Add(ctx, ins)
}

func (c *Committer[In, Out]) callCommit(ctx context.Context, tx Txn[In, Out]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			err = fmt.Errorf("groupcommit: Commit panicked: %v", p)
		}
	}()
	return tx.Commit(ctx)
}

// recoverInto turns a panic into an error in *err.
func recoverInto(err *error, what string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("groupcommit: %s panicked: %v", what, p)
	}
}

// gather adds whatever is already waiting, and, with MaxWait, what arrives
// within it, up to MaxBatch.
func (c *Committer[In, Out]) gather(batch []request[In, Out]) []request[In, Out] {
	var timeout <-chan time.Time
	if c.opts.MaxWait > 0 {
		t := time.NewTimer(c.opts.MaxWait)
		defer t.Stop()
		timeout = t.C
	}
	for len(batch) < c.opts.MaxBatch {
		select {
		case r, ok := <-c.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
			continue
		default:
		}
		if timeout == nil || c.opts.MoreComing != nil && !c.opts.MoreComing() {
			return batch
		}
		select {
		case r, ok := <-c.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		case <-timeout:
			return batch
		}
	}
	return batch
}

func (c *Committer[In, Out]) run(batch []request[In, Out], ins []In) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	start := time.Now()
	outs, err := c.call(ctx, ins)
	var itemErrs ItemErrors
	if errors.As(err, &itemErrs) && len(outs) == len(ins) {
		answerAdds(batch, []added[Out]{{outs: outs, errs: itemErrs}}, nil)
		if c.opts.OnBatch != nil {
			c.opts.OnBatch(len(ins), time.Since(start), nil)
		}
		return
	}
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("groupcommit: batch function returned %d results for %d items", len(outs), len(ins))
	}
	if c.opts.OnBatch != nil {
		c.opts.OnBatch(len(ins), time.Since(start), err)
	}
	answer(batch, outs, err)
}

// answer sends each caller its output, or err to all of them.
func answer[In, Out any](batch []request[In, Out], outs []Out, err error) {
	for i, r := range batch {
		if err != nil {
			r.reply(result[Out]{err: err})
		} else {
			r.reply(result[Out]{out: outs[i]})
		}
	}
}

// answerAdds answers the callers of a pipelined transaction: each with its
// output as it stands now (after Commit) or its item's error, or all with
// err.
func answerAdds[In, Out any](batch []request[In, Out], adds []added[Out], err error) {
	if err != nil {
		answer(batch, nil, err)
		return
	}
	i := 0
	for _, a := range adds {
		for j, out := range a.outs {
			r := result[Out]{out: out}
			if a.errs != nil {
				if e := a.errs.ItemError(j); e != nil {
					r = result[Out]{err: e}
				}
			}
			batch[i].reply(r)
			i++
		}
	}
}

// call runs fn, turning a panic into an error for the whole batch so no
// waiting caller hangs.
func (c *Committer[In, Out]) call(ctx context.Context, ins []In) (outs []Out, err error) {
	defer recoverInto(&err, "batch function")
	return c.fn(ctx, ins)
}
