// Package groupcommit shares one transaction among many concurrent callers.
//
// With synchronous=FULL every SQLite commit is a disk sync, and a PostgreSQL
// commit is a WAL flush: a few thousand per second at most. A Committer lets
// concurrent callers Submit items; a flusher takes every item waiting (up to
// MaxBatch) and hands them to one function call, typically one transaction.
// While that call runs, the next batch gathers, so batches grow with load
// without a timer adding latency when the system is idle.
//
// Guarantees: Submit returns the output for its own item only after the
// function call that held it returned; if that call failed, every Submit in
// the batch gets its error. No item is dropped silently: after Close, Submit
// fails with ErrClosed and items already queued are still flushed.
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
	// Flushers is how many batches may run at once (default 1). SQLite has
	// one writer, so one is right there; PostgreSQL gains from a few.
	Flushers int
	// Timeout bounds one call of the function (default 30s).
	Timeout time.Duration
	// OnBatch, if set, is called after each call with the batch size and how
	// long the call took (for metrics).
	OnBatch func(size int, took time.Duration, err error)
}

type result[Out any] struct {
	out Out
	err error
}

type request[In, Out any] struct {
	in   In
	done chan result[Out]
}

// Committer batches concurrent submissions; see the package comment.
type Committer[In, Out any] struct {
	fn   Func[In, Out]
	opts Options
	reqs chan request[In, Out]

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	wg     sync.WaitGroup
}

// New starts a Committer that calls fn for each batch.
func New[In, Out any](fn Func[In, Out], opts Options) *Committer[In, Out] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if opts.Flushers <= 0 {
		opts.Flushers = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
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

// Submit queues in and waits for the batch holding it to be processed. If
// ctx ends first, Submit returns ctx's error, but the item may still be
// processed.
func (c *Committer[In, Out]) Submit(ctx context.Context, in In) (Out, error) {
	var zero Out
	done := make(chan result[Out], 1)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return zero, ErrClosed
	}
	select {
	case c.reqs <- request[In, Out]{in: in, done: done}:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
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
		if timeout == nil {
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
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("groupcommit: batch function returned %d results for %d items", len(outs), len(ins))
	}
	if c.opts.OnBatch != nil {
		c.opts.OnBatch(len(ins), time.Since(start), err)
	}
	for i, r := range batch {
		if err != nil {
			r.done <- result[Out]{err: err}
		} else {
			r.done <- result[Out]{out: outs[i]}
		}
	}
}

// call runs fn, turning a panic into an error for the whole batch so no
// waiting caller hangs.
func (c *Committer[In, Out]) call(ctx context.Context, ins []In) (outs []Out, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("groupcommit: batch function panicked: %v", p)
		}
	}()
	return c.fn(ctx, ins)
}
