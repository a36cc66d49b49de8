package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestCrashLoop SIGKILLs `hookbox serve` at random moments while 16
// connections send signed deliveries (a quarter of them redeliveries of
// earlier ids) for three schemes, restarting it on a new port each time;
// then it lets the queue drain, stops the server with SIGTERM and checks invariants 1, 2, 4 and 5 from the
// outside: every delivery answered 202 is stored once, done, and was
// forwarded byte for byte to the sink (which refuses 2% of requests to
// force retries; it may see an id more than once, and the count is
// reported).
//
// The short form (default) kills 3 times per database in 8s of load;
// -faults.full (or -faults.kills / -faults.duration) runs the long one and
// prints a summary line.
func TestCrashLoop(t *testing.T) {
	needBinary(t)
	kills, duration := crashSettings()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		crashLoop(t, dbURL, kills, duration, nil, 1)
	})
}

// TestCrashLoopThreeProcesses is TestCrashLoop with three `hookbox serve`
// processes on one PostgreSQL schema, each taking a third of the senders
// and working whatever any of them stored. At each kill one process,
// chosen at random, is SIGKILLed, and at every third kill all three at
// once: a killed process's leases are found by the processes that ran
// beside it, and after a kill of all, by processes that all started
// after it. The invariants are the crash loop's.
func TestCrashLoopThreeProcesses(t *testing.T) {
	needBinary(t)
	t.Parallel()
	kills, duration := crashSettings()
	crashLoop(t, pgtest.URL(t), kills, duration, nil, 3)
}

// TestCrashLoopTwoTargets is TestCrashLoop with two named targets per
// source: every acknowledged delivery must reach the sink once per target
// (under that target's Idempotency-Key), and every event and delivery
// must end done.
func TestCrashLoopTwoTargets(t *testing.T) {
	needBinary(t)
	kills, duration := crashSettings()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		crashLoop(t, dbURL, kills, duration, []string{"app", "audit"}, 1)
	})
}

func crashLoop(t *testing.T, dbURL string, kills int, duration time.Duration, targets []string, procs int) {
	dir := t.TempDir()
	srcs := []source{polarSrc, stripeSrc, githubSrc}
	eps := make([]*endpoint, procs)
	for i := range eps {
		eps[i] = newEndpoint("")
	}
	l := newLoad(eps[0], srcs, 0.25)
	l.eps = eps
	l.targets = targets
	sink := faults.NewSink(faults.SinkOptions{FailRate: 0.02, Check: l.checkBody})
	t.Cleanup(sink.Close)
	config := writeConfig(t, dir, serverSpec{db: dbURL, sources: srcs, forward: sink.URL, targets: targets})
	srvs := make(fleet, procs)
	for i := range srvs {
		logs := dir
		if procs > 1 {
			logs = mkdir(t, filepath.Join(dir, fmt.Sprint("p", i)))
		}
		srvs[i] = newServer(t, logs, config)
		eps[i].set(srvs[i].start().URL())
	}

	// The store is opened once the schema exists, to look at the queue at
	// each kill.
	st := openStore(t, dbURL)

	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	start := time.Now()
	l.run(ctx, 16)

	// Kill at random moments: kills spread over the run, each at a uniform
	// random time within its slot (so some land during start-up and
	// migration, most under load, some while forwarding).
	slot := duration / time.Duration(kills+1)
	midWork := 0
	for k := range kills {
		slotEnd := start.Add(time.Duration(k+1) * slot)
		at := slotEnd.Add(-time.Duration(rand.Int64N(int64(slot))))
		time.Sleep(time.Until(at))
		processing, err := st.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusProcessing, Limit: 1})
		if err == nil && len(processing) > 0 {
			midWork++
		}
		// One process, or with several, a random one and at every third
		// kill all of them.
		victims := []int{rand.IntN(procs)}
		if procs > 1 && k%3 == 2 {
			victims = rand.Perm(procs)
		}
		for _, i := range victims {
			srvs[i].kill()
		}
		t.Logf("kill %d at %s (processes %v)", k+1, time.Now().Format("15:04:05.000"), victims)
		for _, i := range victims {
			eps[i].set(srvs[i].start().URL())
		}
		time.Sleep(time.Until(slotEnd))
	}
	time.Sleep(time.Until(start.Add(duration)))
	stopLoad()
	l.wait()
	counts, _ := l.snapshot()

	f := drainAndCheck(t, srvs, st, l, sink, 2*time.Minute+duration/2)

	db := "sqlite"
	if !isSQLite(dbURL) {
		db = "postgres"
	}
	if len(targets) > 0 {
		db += fmt.Sprintf(" with %d targets per source", len(targets))
	}
	if procs > 1 {
		db += fmt.Sprintf(" with %d processes", procs)
	}
	summary := fmt.Sprintf("crash loop %s: kills=%d (%d with work in flight) load=%s acknowledged=%d (202 answers %d, %d duplicate) stored=%d sink_seen=%d missing=%d sink_duplicates=%d not_done=%d phantoms=%d max_attempts=%d sent=%d no_answer=%d 503=%d sink_refused=%d backlog=%d drained_in=%s",
		db, kills, midWork, duration, f.Acknowledged, f.Answers202, counts.Duplicate, f.Stored, f.SinkSeen, f.Missing, f.SinkDups, f.NotDone,
		f.Phantoms, f.MaxAttempts, counts.Sent, counts.NoAnswer, counts.Unavailable, sink.Stats().Refused, f.Backlog, f.Drain.Round(100*time.Millisecond))
	t.Log(summary)
	if *fullRun || *killsFlag > 0 {
		fmt.Println("faults:", summary)
	}
}

func isSQLite(dbURL string) bool { return len(dbURL) > 7 && dbURL[:7] == "sqlite:" }
