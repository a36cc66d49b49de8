package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/config"
)

// execConfig is a config with two exec targets, one bounded to 4 at
// once, and a forward target, under workers.concurrency 10.
func execConfig() *config.Config {
	return &config.Config{
		Workers: config.Workers{Concurrency: 10},
		Sources: []config.Source{{Name: "a", Targets: []config.Target{
			{Name: "run", Exec: []string{"/bin/true"}, MaxConcurrency: 4},
			{Name: "post", Forward: "http://127.0.0.1:1/"},
		}}, {Name: "b", Targets: []config.Target{
			{Name: "run", Exec: []string{"/bin/true"}, MaxConcurrency: 3},
		}}},
	}
}

// TestProcLimitWarnings: a process limit below what the config needs
// (its exec commands at once, a process and a thread each, and room for
// hookbox's own threads) is warned about at serve's start, saying which
// limit, its value, what the config needs and what to raise; one at or
// above the need is not. Before, serve started silently under a limit at
// which its exec deliveries could not fork and the Go runtime aborted.
func TestProcLimitWarnings(t *testing.T) {
	cfg := execConfig()
	if got := execSlots(cfg); got != 7 {
		t.Fatalf("exec slots %d, want 7 (4 + 3)", got)
	}
	need := procNeed(cfg)
	if need < 2*7+goThreads {
		t.Fatalf("need %d, want at least %d", need, 2*7+goThreads)
	}
	limits := []procLimit{
		{what: "RLIMIT_NPROC (ulimit -u)", max: uint64(need - 1), raise: "raise LimitNPROC"},
		{what: "pids.max", max: uint64(need), raise: "raise TasksMax"},
	}
	ws := procLimitWarnings(cfg, limits)
	if len(ws) != 1 {
		t.Fatalf("%d warnings, want 1 (the limit below the need): %q", len(ws), ws)
	}
	for _, want := range []string{"RLIMIT_NPROC (ulimit -u) is " + strconv.Itoa(need-1), "needs about " + strconv.Itoa(need),
		"7 exec commands at once", "raise LimitNPROC", "workers.concurrency"} {
		if !strings.Contains(ws[0], want) {
			t.Errorf("warning %q does not say %q", ws[0], want)
		}
	}

	// Exec commands without a max_concurrency of their own take every
	// slot; the slots bound them all the same.
	cfg.Sources = append(cfg.Sources, config.Source{Name: "c", Exec: []string{"/bin/true"}})
	if got := execSlots(cfg); got != 10 {
		t.Errorf("exec slots %d, want workers.concurrency's 10", got)
	}
	// Without exec, only hookbox's own threads count.
	plain := &config.Config{Sources: []config.Source{{Name: "a", Forward: "http://127.0.0.1:1/"}}}
	if got := execSlots(plain); got != 0 {
		t.Errorf("exec slots %d without exec, want 0", got)
	}
	if ws := procLimitWarnings(plain, []procLimit{{what: "x", max: 1000}}); len(ws) != 0 {
		t.Errorf("warned at 1000 without exec: %q", ws)
	}
	if ws := procLimitWarnings(plain, []procLimit{{what: "x", max: 10}}); len(ws) != 1 || strings.Contains(ws[0], "exec commands at once") {
		t.Errorf("at 10 without exec: %q, want one warning that counts no exec commands", ws)
	}
}
