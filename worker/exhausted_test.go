package worker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestExhaustedAttemptsNotCharged: a target that cannot make its attempt
// because hookbox itself ran out of a resource (a dial refused EMFILE, as
// net.Dial reports it; a fork refused EAGAIN, which Exec marks Exhausted)
// is given back, twice the event's max_attempts in a row, and the event
// ends done once the resource is back. Before, each such failure was
// charged as the app's and the event was dead after max_attempts.
func TestExhaustedAttemptsNotCharged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		failures := 2 * fast.MaxAttempts
		var calls atomic.Int64
		p.Route("limits", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			n := calls.Add(1)
			switch {
			case n > int64(failures):
				return nil
			case n%2 == 0:
				return worker.Exhausted(&os.PathError{Op: "fork/exec", Path: "/bin/true", Err: syscall.EAGAIN})
			}
			return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
		}))
		p.SetPolicy("limits", fast)
		start(t, p)
		rs := ingest(t, s, storetest.Delivery("limits", "1"))
		e := waitFinished(t, s, p, rs[0].ID)
		if e.Status != hookbox.StatusDone {
			t.Fatalf("event %s after %d calls, want done (last error %q)", e.Status, calls.Load(), e.LastError)
		}
		as, err := s.Attempts(context.Background(), rs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != failures+1 {
			t.Fatalf("%d attempts recorded, want %d", len(as), failures+1)
		}
		for i, a := range as[:failures] {
			if a.Outcome != hookbox.AttemptReleased || !strings.Contains(a.Error, "ran out of a resource") {
				t.Errorf("attempt %d = %s %q, want released, saying hookbox ran out of a resource", i+1, a.Outcome, a.Error)
			}
		}
		if last := as[failures]; last.Outcome != hookbox.AttemptDone {
			t.Errorf("last attempt %s, want done", last.Outcome)
		}
	})
}

// TestExhaustedHandlerNotCharged: a Go handler, apply-only or two-phase,
// whose attempt fails because hookbox ran out of descriptors is given
// back as a target's is, inside the shared work transaction too.
func TestExhaustedHandlerNotCharged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
		failures := 2 * fast.MaxAttempts
		emfile := &os.PathError{Op: "open", Path: "/etc/app.conf", Err: syscall.EMFILE}
		var applies, prepares atomic.Int64
		p.Handle("apply", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if applies.Add(1) <= int64(failures) {
				return emfile
			}
			return nil
		})
		p.HandlePhases("phases", "", worker.Phases{Prepare: func(ctx context.Context, ev *hookbox.Event) (any, error) {
			if prepares.Add(1) <= int64(failures) {
				return nil, emfile
			}
			return nil, nil
		}})
		p.SetPolicy("apply", fast)
		p.SetPolicy("phases", fast)
		start(t, p)
		rs := ingest(t, s, storetest.Delivery("apply", "1"), storetest.Delivery("phases", "1"))
		for _, r := range rs {
			e := waitFinished(t, s, p, r.ID)
			as, err := s.Attempts(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			released := 0
			for _, a := range as {
				if a.Outcome == hookbox.AttemptReleased {
					released++
				}
			}
			if e.Status != hookbox.StatusDone || released != failures {
				t.Errorf("event %d (%s): %s with %d attempts given back of %d, want done with %d (last error %q)",
					r.ID, e.Source, e.Status, released, len(as), failures, e.LastError)
			}
		}
	})
}

// TestExhaustedRunSlowsRetries: while every attempt of a pool is given
// back for want of hookbox's own resources, the waits before the next
// tries grow with the run, up to a minute, where each event came round
// every 1 to 2 s (its backoff, which a given-back attempt does not grow),
// a write each time, for as long as the host stayed at its limit.
func TestExhaustedRunSlowsRetries(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.Route("full", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
	}))
	p.SetPolicy("full", worker.Policy{MaxAttempts: 3, BackoffMin: time.Second, BackoffMax: time.Hour, Timeout: 5 * time.Second})
	start(t, p)
	const n = 8
	var ds []hookbox.Delivery
	for i := range n {
		ds = append(ds, storetest.Delivery("full", strconv.Itoa(i)))
	}
	rs := ingest(t, s, ds...)
	longest := time.Duration(0)
	for _, r := range rs {
		as := awaitAttempts(t, s, p, r.ID, 1)
		e, err := s.Event(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == hookbox.StatusDead || e.Attempts-e.AttemptBase != 0 {
			t.Errorf("event %d: %s, %d attempts charged, want none", r.ID, e.Status, e.Attempts-e.AttemptBase)
		}
		last := as[len(as)-1]
		if last.Outcome != hookbox.AttemptReleased {
			t.Errorf("event %d: attempt %s, want released", r.ID, last.Outcome)
		}
		longest = max(longest, e.NextAttemptAt.Sub(last.FinishedAt))
	}
	// The 8th give-back in a row waits between 30 s and a minute.
	if longest < 30*time.Second || longest > time.Minute+time.Second {
		t.Errorf("longest wait after a run of %d give-backs: %v, want 30 s to a minute", n, longest)
	}
}

// awaitAttempts waits until event id has at least n attempts recorded and
// returns them, failing after 20 s.
func awaitAttempts(t *testing.T, s dbtest.Store, p *worker.Pool, id int64, n int) []hookbox.Attempt {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		as, err := s.Attempts(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) >= n {
			return as
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d has %d attempts after 20s, want %d", id, len(as), n)
		}
		p.Notify()
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIsExhausted: descriptors are known by their errno wherever they are
// wrapped; other errors, even temporary ones, are not hookbox's own.
func TestIsExhausted(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("socket", syscall.EMFILE)}, true},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.ENFILE}, true},
		{worker.Exhausted(errors.New("fork: EAGAIN")), true},
		{worker.Permanent(worker.Exhausted(errors.New("x"))), true},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false},
		{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.EAGAIN}, false}, // only Exec knows it was a fork
		{errors.New("too many open files"), false},                               // by errno, never by text
		{nil, false},
	} {
		if got := worker.IsExhausted(c.err); got != c.want {
			t.Errorf("IsExhausted(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
