package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/target"
)

// TestMain lets the test binary be an exec command's supervisor, as
// hookbox's binary is: `serve` run by the tests' helpers runs commands
// under one, as in production.
func TestMain(m *testing.M) {
	target.ExecSupervisor()
	os.Exit(m.Run())
}

// groupServe is `hookbox serve`, run by TestSecondSignalHelper with main's
// signal handling, with one delivery accepted whose command runs: a script
// that ignores SIGTERM and starts a background process (which ignores it
// too), both of which run until killed.
type groupServe struct {
	cmd           *exec.Cmd
	out           *syncbuf.Buffer
	exited        chan error
	leader, child int // the command's pid and its background process's
}

func startGroupServe(t *testing.T) *groupServe {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pids := filepath.Join(dir, "pids")
	sh := filepath.Join(dir, "group.sh")
	if err := os.WriteFile(sh, []byte(fmt.Sprintf(`#!/bin/sh
trap '' TERM
sleep 300 &
echo $$ $! > %[1]s.tmp
mv %[1]s.tmp %[1]s
wait
`, pids)), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: %q
db: "sqlite:%s"
shutdown_timeout: 60s
sources:
  - name: slow
    scheme: none
    exec: [%q]
    timeout: 120s
`, addr, filepath.Join(dir, "hookbox.db"), sh)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &groupServe{out: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(os.Args[0], "-test.run=^TestSecondSignalHelper$", "-test.count=1")
	s.cmd.Env = append(os.Environ(), signalHelperEnv+"="+cfg)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { s.cmd.Process.Kill() })

	waitUntil(t, time.Minute, "a delivery accepted", func() bool {
		resp, err := http.Post("http://"+addr+"/webhooks/slow", "application/json", strings.NewReader(`{"id":"1"}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted
	})
	var b []byte
	waitUntil(t, time.Minute, "the command started", func() bool {
		b, err = os.ReadFile(pids)
		return err == nil
	})
	f := strings.Fields(string(b))
	if len(f) == 2 {
		s.leader, _ = strconv.Atoi(f[0])
		s.child, _ = strconv.Atoi(f[1])
	}
	if s.leader <= 1 || s.child <= 1 {
		t.Fatalf("pids file %q", b)
	}
	t.Cleanup(func() {
		// Never leave them behind ourselves, whatever the test found.
		syscall.Kill(s.leader, syscall.SIGKILL)
		syscall.Kill(s.child, syscall.SIGKILL)
	})
	return s
}

// awaitGone waits until the command and its background process no longer
// run (a zombie has exited), and fails the test if either still runs a
// minute after hookbox ended.
func (s *groupServe) awaitGone(t *testing.T) {
	t.Helper()
	for _, p := range []struct {
		pid  int
		what string
	}{{s.leader, "the exec command"}, {s.child, "the exec command's background process"}} {
		deadline := time.Now().Add(time.Minute)
		for processRuns(p.pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) still runs a minute after hookbox ended: reparented, with no timeout, beside the next hookbox's attempt at its event", p.what, p.pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// processRuns reports whether pid runs: it exists and is not a zombie.
func processRuns(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestSecondSignalKillsExecCommands: when a second Ctrl-C or SIGTERM makes
// hookbox exit at once, the exec command of the attempt in flight and the
// process it started go too, though they ignore SIGTERM. Before, hookbox
// exited with os.Exit and left them running, reparented to init, with no
// timeout; the next hookbox ran their event again beside them.
func TestSecondSignalKillsExecCommands(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "" {
		t.Skip("in the helper")
	}
	s := startGroupServe(t)
	s.cmd.Process.Signal(syscall.SIGINT)
	waitUntil(t, time.Minute, `"stopping" logged`, func() bool { return strings.Contains(s.out.String(), "stopping") })
	// Timed from the line, which hookbox writes after it took the first
	// signal's time: from the sending, a loaded machine could deliver the
	// first signal late enough to make the second its repeat.
	first := time.Now()
	waitUntil(t, time.Minute, "a second Ctrl-C's delay", func() bool { return time.Since(first) > sameStop })
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("second signal: %v, want exit 130\n%s", err, s.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("no exit after the second signal\n%s", s.out.String())
	}
	s.awaitGone(t)
}

// TestKilledServeLeavesNoExecCommand: when hookbox is SIGKILLed (kill -9,
// the OOM killer) during an exec attempt, the command and the process it
// started are killed with it, by the command's supervisor. Before, they
// ran on with no timeout, and once the event's lease ended the next
// hookbox ran the event again beside them: two runs of one event at once.
func TestKilledServeLeavesNoExecCommand(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "" {
		t.Skip("in the helper")
	}
	s := startGroupServe(t)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	s.awaitGone(t)
}

// TestExecSupervisorNotInHelp: the argument that makes hookbox an exec
// command's supervisor is no command: help does not list it.
func TestExecSupervisorNotInHelp(t *testing.T) {
	out, _, err := runCLI(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(out), "supervisor") {
		t.Errorf("help mentions the supervisor:\n%s", out)
	}
}
