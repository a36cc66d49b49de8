package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hookbox/hookbox/internal/childtest"
)

// TestPidsMax: the pids.max that bounds hookbox is found from
// /proc/self/cgroup on cgroup v2 and on v1's pids controller, the lowest
// of its cgroup's and those above it, and none when every level says
// "max" or has no file.
func TestPidsMax(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("system.slice/hookbox.service/pids.max", "max")
	write("system.slice/pids.max", "50")
	write("pids/docker/abc/pids.max", "100")
	write("pids/docker/pids.max", "max")

	for _, c := range []struct {
		name, cgroup string
		path         string
		max          uint64
	}{
		{"v2, a parent's limit", "0::/system.slice/hookbox.service\n", "system.slice/pids.max", 50},
		{"v1 pids controller", "8:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n", "pids/docker/abc/pids.max", 100},
		{"lowest of both", "8:pids:/docker/abc\n0::/system.slice/hookbox.service\n", "system.slice/pids.max", 50},
		{"none", "8:pids:/docker\n0::/\n", "", 0},
	} {
		path, max, ok := pidsMax([]byte(c.cgroup), root, os.ReadFile)
		if c.path == "" {
			if ok {
				t.Errorf("%s: found %s = %d, want none", c.name, path, max)
			}
			continue
		}
		if !ok || path != filepath.Join(root, c.path) || max != c.max {
			t.Errorf("%s: %s = %d (%v), want %s = %d", c.name, path, max, ok, c.path, c.max)
		}
	}
}

// nprocChildEnv makes TestLowNprocChild run (in the child process
// TestLowNprocWarns starts).
const nprocChildEnv = "HOOKBOX_TEST_NPROC_CHILD"

// TestLowNprocWarns: a process whose soft RLIMIT_NPROC is lowered below
// what the config needs (setrlimit, in a child process) reads it and is
// warned about it.
func TestLowNprocWarns(t *testing.T) {
	childtest.Run(t, "TestLowNprocChild", nprocChildEnv+"=1")
}

func TestLowNprocChild(t *testing.T) {
	if os.Getenv(nprocChildEnv) == "" {
		t.Skip("run by TestLowNprocWarns")
	}
	cfg := execConfig()
	low := uint64(procNeed(cfg) - 1)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: low, Max: rl.Max}); err != nil {
		t.Skipf("setrlimit RLIMIT_NPROC refused: %v", err)
	}
	l, ok := nprocLimit()
	if !ok || l.max != low {
		t.Fatalf("read RLIMIT_NPROC %d (%v), want %d", l.max, ok, low)
	}
	ws := procLimitWarnings(cfg, []procLimit{l})
	if len(ws) != 1 || !strings.Contains(ws[0], "RLIMIT_NPROC (ulimit -u)") || !strings.Contains(ws[0], "is "+strconv.FormatUint(low, 10)) ||
		!strings.Contains(ws[0], "LimitNPROC=") {
		t.Fatalf("warnings %q, want one naming RLIMIT_NPROC at %d and LimitNPROC=", ws, low)
	}
	t.Log(ws[0])
	if hostRoot() {
		t.Log("root of the host: readProcLimits leaves RLIMIT_NPROC out, which the kernel does not hold root to")
	}
}
