package worker_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/worker"
)

// TestPoolsOfOneProcess: two pools started by one process on one store
// (as a program running two services does) are both alive. The second
// must not take the first, whose record has this process's pid, for a
// pool of a restarted container, forget it and charge the events it is
// running.
func TestPoolsOfOneProcess(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		var logs strings.Builder
		a := worker.New(s, worker.Options{Name: "first"})
		a.Handle("one", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, a)
		b := worker.New(s, worker.Options{Name: "second", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		b.Handle("two", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, b)
		if strings.Contains(logs.String(), "without a trace") {
			t.Errorf("the second pool took the first for dead:\n%s", logs.String())
		}
		ctx := context.Background()
		host, _ := os.Hostname()
		others, err := s.WorkerStarted(ctx, hookbox.Worker{Name: "probe", Host: host, PID: os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.WorkerStopped(ctx, "probe")
		var names []string
		for _, o := range others {
			names = append(names, o.Name)
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "first-") }) {
			t.Errorf("pool records %v: the first pool's was forgotten", names)
		}
	})
}

// TestPoolsOfOtherContainers: a pool recorded under this host name by a
// process in another pid namespace (a container sharing the host's name,
// as host networking does; here one running an older hookbox, which
// recorded the bare host name) is alive whatever its pid means here: a
// starting pool must not forget it and charge what it runs. A pool of
// this very namespace whose process is gone is still forgotten at once.
func TestPoolsOfOtherContainers(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no pid namespaces here:", err)
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		host, _ := os.Hostname()
		gone := exec.Command("true")
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		records := map[string]hookbox.Worker{
			"older-hookbox-same-pid": {Host: host, PID: os.Getpid()},
			"other-ns-same-pid":      {Host: host + " pid:[1]", PID: os.Getpid()},
			"other-ns-pid-not-here":  {Host: host + " pid:[1]", PID: gone.Process.Pid},
		}
		for name, w := range records {
			w.Name = name
			if _, err := s.WorkerStarted(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.WorkerStarted(ctx, hookbox.Worker{Name: "this-ns-gone", Host: host + " " + ns, PID: gone.Process.Pid}); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		p := worker.New(s, worker.Options{Name: "starting", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		p.Handle("one", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, p)
		others, err := s.WorkerStarted(ctx, hookbox.Worker{Name: "probe", Host: "elsewhere", PID: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.WorkerStopped(ctx, "probe")
		left := map[string]bool{}
		for _, o := range others {
			left[o.Name] = true
		}
		for name := range records {
			if !left[name] {
				t.Errorf("the pool %q of another container was taken for dead and forgotten\n%s", name, logs.String())
			}
		}
		if left["this-ns-gone"] {
			t.Error("the pool of a gone process of this pid namespace was not forgotten at once")
		}
	})
}

// TestPoolStartsOnce: a second Start, and a Start after Stop, fail with an
// error that says what to do, and leave the pool's record as it was: a
// stopped pool's record must not come back (every pool that starts later
// would take it for a pool still running, or for a dead one, and go into
// recovery).
func TestPoolStartsOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		p := worker.New(s, worker.Options{Name: "once"})
		p.Handle("one", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, p)
		if err := p.Start(ctx); err == nil || !strings.Contains(err.Error(), "already started") {
			t.Errorf("second Start: %v, want already started", err)
		}
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		err := p.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "cannot start again") || !strings.Contains(err.Error(), "worker.New") {
			t.Errorf("Start after Stop: %v, want an error naming worker.New", err)
		}
		host, _ := os.Hostname()
		others, err := s.WorkerStarted(ctx, hookbox.Worker{Name: "probe", Host: host, PID: os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.WorkerStopped(ctx, "probe")
		for _, o := range others {
			if strings.HasPrefix(o.Name, "once-") {
				t.Errorf("the stopped pool's record %q is back after a refused Start", o.Name)
			}
		}
	})
}

// TestLongLeasePoolNotTakenForDead: another process judges a pool's record
// by its own staleness bound, which follows its own (short) leases. A pool
// whose every source has a long timeout must still refresh its record
// within that bound, or the other process takes it for dead, charges the
// events it runs and goes into recovery at each of its refreshes. Here the
// refresh is capped at 100 ms and the other side's bound is 1 s.
func TestLongLeasePoolNotTakenForDead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		p := worker.New(s, worker.WithRecordRefresh(worker.Options{Name: "slow"}, 100*time.Millisecond))
		p.SetPolicy("slow", worker.Policy{MaxAttempts: 3, Timeout: 5 * time.Minute})
		p.Handle("slow", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		start(t, p)
		host, _ := os.Hostname()
		if _, err := s.WorkerStarted(ctx, hookbox.Worker{Name: "judge", Host: host, PID: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
		defer s.WorkerStopped(ctx, "judge")
		// Three times the other side's bound must pass for the question
		// to be asked at all; the pool refreshes 30 times meanwhile.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			dead, err := s.WorkerSeen(ctx, "judge", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if dead > 0 {
				t.Fatalf("a pool with 5-minute timeouts was taken for dead by one that waits 1 s for a refresh")
			}
		}
	})
}
