package worker_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

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
