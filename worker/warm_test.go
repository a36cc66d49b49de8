package worker

import (
	"sync"
	"testing"
	"time"
)

// TestWarmRunsAtOnceAndReuses: functions never wait for one another (each
// runs at once, on a new goroutine when none is free), and a goroutine
// whose function returned runs the next one instead of a new goroutine.
func TestWarmRunsAtOnceAndReuses(t *testing.T) {
	w := newWarm()
	defer w.stop()
	const n = 8
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(n)
	var done sync.WaitGroup
	done.Add(n)
	for range n {
		w.run(func() {
			running.Done()
			<-release // held until all n run: a queued one would never start
			done.Done()
		})
	}
	waitGroup(t, &running, "all functions running at once")
	close(release)
	waitGroup(t, &done, "all functions returned")
	if got := w.started.Load(); got != n {
		t.Fatalf("%d goroutines started for %d functions held at once", got, n)
	}
	// The n goroutines now wait for work (until warmIdle): one at a time,
	// the next functions run on them. A goroutine is free again only once
	// it is back in its select, so wait for each function to be taken.
	for range 3 * n {
		ran := make(chan struct{})
		w.run(func() { close(ran) })
		<-ran
	}
	if got := w.started.Load(); got > n+1 {
		t.Errorf("%d goroutines started in all; the kept ones were not reused", got)
	}
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting: %s", what)
	}
}
