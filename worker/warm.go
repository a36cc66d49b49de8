package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// warmIdle is how long a goroutine of warm waits for its next function
// before it ends.
const warmIdle = 10 * time.Second

// warm runs functions on goroutines that it keeps, for warmIdle after each
// returns, to run the next. A delivery then starts on a stack an earlier
// one already grew: a forward's HTTP round trip needs tens of KiB of
// stack, and a fresh goroutine reaches that by copying its stack several
// times, about 5% of the CPU of a forward drain. Functions run at once
// (never queued): when no kept goroutine is waiting, a new one starts.
type warm struct {
	work     chan func()
	quit     chan struct{}
	stopOnce sync.Once
	started  atomic.Int64 // goroutines started, for tests
}

func newWarm() *warm {
	return &warm{work: make(chan func()), quit: make(chan struct{})}
}

// run runs f on a kept goroutine, or on a new one.
func (w *warm) run(f func()) {
	select {
	case w.work <- f:
	default:
		w.started.Add(1)
		go w.loop(f)
	}
}

func (w *warm) loop(f func()) {
	idle := time.NewTimer(warmIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // let f's captures go while waiting
		idle.Reset(warmIdle)
		select {
		case f = <-w.work:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends the kept goroutines once their functions return; run must
// not be called after.
func (w *warm) stop() { w.stopOnce.Do(func() { close(w.quit) }) }
