package target_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/childtest"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// limitsChildEnv runs TestOutOfDescriptorsChild's body in a child process,
// whose descriptor limit it may lower without touching the test's.
const limitsChildEnv = "HOOKBOX_TEST_LIMITS_CHILD_URL"

// TestOutOfDescriptorsNotCharged: in a process that has used up its
// RLIMIT_NOFILE, a forward's dial and an exec's pipes fail, and both
// failures are worker.IsExhausted (given back, not charged to the app or
// the command, see worker.Exhausted) and say what ran out. Before, they
// were the target's failures, and a host out of descriptors walked every
// event to dead in max_attempts tries. The child process lowers its own
// limit; the receiver it forwards to runs here.
func TestOutOfDescriptorsNotCharged(t *testing.T) {
	// Each reply closes its connection, so every attempt dials.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
	}))
	defer srv.Close()
	childtest.Run(t, "TestOutOfDescriptorsChild", limitsChildEnv+"="+srv.URL)
}

// TestOutOfDescriptorsChild is TestOutOfDescriptorsNotCharged's child.
func TestOutOfDescriptorsChild(t *testing.T) {
	url := os.Getenv(limitsChildEnv)
	if url == "" {
		t.Skip("run by TestOutOfDescriptorsNotCharged")
	}
	fwd, err := target.NewForward(target.ForwardOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := target.NewExec(target.ExecOptions{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Payload: []byte("{}")}
	// Both work before the limit, so the failures below are the limit's.
	for _, tg := range []worker.Target{fwd, ex} {
		if err := tg.Deliver(context.Background(), ev); err != nil {
			t.Fatalf("%T before the limit: %v", tg, err)
		}
	}
	defer childtest.UseUpDescriptors(t, 128)()
	for _, tg := range []worker.Target{fwd, ex} {
		err := tg.Deliver(context.Background(), ev)
		if !worker.IsExhausted(err) || !strings.Contains(err.Error(), "too many open files") {
			t.Errorf("%T out of descriptors: %v, want an error worker.IsExhausted that says so", tg, err)
		}
	}
}

// TestForkRefusedNotCharged: a fork refused for the process limit
// (EAGAIN: RLIMIT_NPROC, a pids cgroup) or memory is worker.IsExhausted;
// a command that is not there, or not executable, stays the command's
// failure. (As root, as CI runs, RLIMIT_NPROC is not enforced, so the
// errors are those os/exec returns.)
func TestForkRefusedNotCharged(t *testing.T) {
	ex, err := target.NewExec(target.ExecOptions{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		errno syscall.Errno
		want  bool
	}{{syscall.EAGAIN, true}, {syscall.ENOMEM, true}, {syscall.ENOENT, false}, {syscall.EACCES, false}, {syscall.ETXTBSY, false}} {
		err := ex.StartError(&os.PathError{Op: "fork/exec", Path: "/bin/true", Err: c.errno})
		if got := worker.IsExhausted(err); got != c.want || !errors.Is(err, c.errno) {
			t.Errorf("start failed with %v: IsExhausted %v (%v), want %v", c.errno, got, err, c.want)
		}
	}
}

// TestSupervisorCrashNotCharged: a supervisor whose Go runtime dies (exit
// code 2, as when it cannot start a thread under the process limit)
// before reporting on the command is hookbox's failure, given back
// (worker.IsExhausted), not the command's exit code 2. Here the command
// makes its supervisor crash (a SIGSEGV sent by kill: the runtime's crash
// exit; SIGABRT, which did so before, the supervisor now catches and
// leaves to the command); under a
// real RLIMIT_NPROC the hookbox binary's supervisors died so ("pthread_create
// failed"), and each was charged to the event. A supervisor killed by a
// signal is still the command's doing, and charged.
func TestSupervisorCrashNotCharged(t *testing.T) {
	if !target.CanSupervise {
		t.Skip("no supervisor on this system")
	}
	was := target.SetSupervised(true)
	defer target.SetSupervised(was)
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Payload: []byte("{}")}
	for _, c := range []struct {
		signal string
		want   bool
	}{{"SEGV", true}, {"KILL", false}} {
		ex, err := target.NewExec(target.ExecOptions{Argv: []string{"/bin/sh", "-c", "kill -" + c.signal + " $PPID; sleep 5"}})
		if err != nil {
			t.Fatal(err)
		}
		err = ex.Deliver(context.Background(), ev)
		if err == nil || worker.IsExhausted(err) != c.want {
			t.Errorf("supervisor sent SIG%s: %v, exhausted %v, want %v", c.signal, err, worker.IsExhausted(err), c.want)
		}
	}
}
