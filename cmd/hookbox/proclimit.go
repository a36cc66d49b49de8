package main

import (
	"fmt"
	"runtime"

	"github.com/hookbox/hookbox/config"
)

// procLimit is one bound on the processes and threads hookbox may have:
// the soft RLIMIT_NPROC of its user, or the pids.max of its cgroup.
type procLimit struct {
	// what names the limit, where it is read and what it counts.
	what string
	// max is its value; raise says how to raise it.
	max   uint64
	raise string
}

// goThreads is the room left for hookbox's own threads when it judges a
// process limit: the Go runtime's (one per CPU it runs on, the system
// monitor, the garbage collector's) and those blocked in system calls
// (disk syncs, reads of files), well above what serve uses when idle.
const goThreads = 48

// execSlots is how many exec commands cfg may run at once: each exec
// target's max_concurrency (workers.concurrency where it has none),
// added up, and never more than workers.concurrency, which bounds every
// delivery in flight.
func execSlots(cfg *config.Config) int {
	slots := cfg.Workers.Concurrency
	if slots <= 0 {
		slots = config.DefaultConcurrency
	}
	n := 0
	for _, s := range cfg.Sources {
		if len(s.Exec) > 0 {
			n += slots
		}
		for _, t := range s.Targets {
			switch {
			case len(t.Exec) == 0:
			case t.MaxConcurrency > 0:
				n += t.MaxConcurrency
			default:
				n += slots
			}
		}
	}
	return min(n, slots)
}

// procNeed is about how many processes and threads serve needs under
// cfg: each exec command running is a process, and a thread of hookbox's
// waits for it; hookbox's own threads come on top (goThreads, or more on
// a machine with many CPUs).
func procNeed(cfg *config.Config) int {
	return 2*execSlots(cfg) + max(goThreads, 2*runtime.GOMAXPROCS(0)+16)
}

// procLimitWarnings warns about each of limits below what cfg needs
// (procNeed): when it is reached, an exec command cannot start (its
// delivery is given back and retried, not charged) and the Go runtime,
// which cannot create a thread, aborts hookbox.
func procLimitWarnings(cfg *config.Config, limits []procLimit) []string {
	need := procNeed(cfg)
	execs := execSlots(cfg)
	var ws []string
	for _, l := range limits {
		if l.max >= uint64(need) {
			continue
		}
		parts := fmt.Sprintf("%d threads of hookbox's own", need-2*execs)
		if execs > 0 {
			parts = fmt.Sprintf("%d exec commands at once, a process and a waiting thread each, and %s", execs, parts)
		}
		ws = append(ws, fmt.Sprintf("the process limit is low: %s is %d, and this config needs about %d (%s); "+
			"once it is reached exec commands cannot start (their deliveries are retried, not charged) and hookbox "+
			"aborts when it cannot create a thread: %s, or lower workers.concurrency or the exec targets' max_concurrency",
			l.what, l.max, need, parts, l.raise))
	}
	return ws
}
