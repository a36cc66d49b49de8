//go:build unix

// Package childtest runs a test's body in a child process of the test
// binary, for what a test may not do to its own process: lower its limits
// and use them up.
package childtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// Run runs the test named child of this test binary in a child process,
// with env added to the environment (by which child knows it is the child
// and not a test of its own), and fails t with the child's output unless
// the child passed; it skips t when the child skipped.
func Run(t *testing.T, child string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	text := string(out)
	if strings.Contains(text, "--- SKIP") {
		t.Skip(text)
	}
	if err != nil || !strings.Contains(text, "--- PASS: "+child) {
		t.Fatalf("child: %v\n%s", err, text)
	}
}

// UseUpDescriptors lowers this process's RLIMIT_NOFILE to limit (skipping
// t when the system refuses) and opens files until the next open fails
// with EMFILE. The returned function closes them. For a child process
// (see Run): the limit stays lowered.
func UseUpDescriptors(t *testing.T, limit uint64) (release func()) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: limit, Max: lim.Max}); err != nil {
		t.Skipf("setrlimit RLIMIT_NOFILE refused: %v", err)
	}
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close()
		}
		held = nil
	}
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			return release
		}
		if err != nil {
			release()
			t.Fatal(err)
		}
		held = append(held, f)
	}
}
