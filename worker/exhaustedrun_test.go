package worker_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestLongExhaustedRunKeepsThePoolAlive: a host at its file descriptor
// limit with a backlog of 40 events, the default BackoffMin of 1 s: every
// attempt is given back (EMFILE), and the pool goes on giving them back.
// The 35th give-back in a row computed its wait as BackoffMin<<34, which
// overflowed: rand.N got a negative bound and panicked on the worker's
// goroutine, killing the process.
func TestLongExhaustedRunKeepsThePoolAlive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, Concurrency: 8})
		p.Route("full", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
		}))
		p.SetPolicy("full", worker.Policy{MaxAttempts: 3, BackoffMin: time.Second, BackoffMax: time.Hour, Timeout: 5 * time.Second})
		start(t, p)
		const n = 40
		var ds []hookbox.Delivery
		for i := range n {
			ds = append(ds, storetest.Delivery("full", strconv.Itoa(i)))
		}
		rs := ingest(t, s, ds...)
		for _, r := range rs {
			as := awaitAttempts(t, s, p, r.ID, 1)
			if last := as[len(as)-1]; last.Outcome != hookbox.AttemptReleased {
				t.Errorf("event %d: attempt %s, want released", r.ID, last.Outcome)
			}
		}
	})
}
