package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/syncbuf"
)

// signalHelperEnv makes the test binary run `hookbox serve` with main's
// signal handling, for startSlowServe; its value is the config file.
const signalHelperEnv = "HOOKBOX_TEST_SIGNAL_CONFIG"

// TestSecondSignalHelper is skipped unless startSlowServe starts it.
func TestSecondSignalHelper(t *testing.T) {
	cfg := os.Getenv(signalHelperEnv)
	if cfg == "" {
		t.Skip("run by startSlowServe")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exitOnSecondSignal(cancel)
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--config", cfg})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowServe is `hookbox serve`, run by TestSecondSignalHelper with main's
// signal handling, with one delivery accepted whose command has started
// and runs until the file release exists.
type slowServe struct {
	cmd     *exec.Cmd
	out     *syncbuf.Buffer
	exited  chan error
	release string
}

func startSlowServe(t *testing.T) *slowServe {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	cfg := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: %q
db: "sqlite:%s"
shutdown_timeout: 60s
sources:
  - name: slow
    scheme: none
    exec: ["/bin/sh", "-c", "touch %s; while [ ! -e %s ]; do sleep 0.05; done"]
    timeout: 120s
`, addr, filepath.Join(dir, "hookbox.db"), started, release)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &slowServe{out: &syncbuf.Buffer{}, exited: make(chan error, 1), release: release}
	s.cmd = exec.Command(os.Args[0], "-test.run=^TestSecondSignalHelper$", "-test.count=1")
	s.cmd.Env = append(os.Environ(), signalHelperEnv+"="+cfg)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { s.cmd.Process.Kill() })

	waitUntil(t, 20*time.Second, "a delivery accepted", func() bool {
		resp, err := http.Post("http://"+addr+"/webhooks/slow", "application/json", strings.NewReader(`{"id":"1"}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted
	})
	waitUntil(t, 20*time.Second, "the command started", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	return s
}

// exitCode waits up to 20 s for the process to exit and returns its code.
func (s *slowServe) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case err := <-s.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s later\n%s", s.out.String())
		return -1
	}
}

// TestSecondSignalExitsAtOnce: the first SIGINT starts an orderly stop
// that waits for running work (here a command that runs until told, with
// a long shutdown_timeout); a second one, later, makes hookbox exit at
// once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "" {
		t.Skip("in the helper")
	}
	s := startSlowServe(t)
	s.cmd.Process.Signal(syscall.SIGINT)
	waitUntil(t, 20*time.Second, `"stopping" logged`, func() bool { return strings.Contains(s.out.String(), "stopping") })
	first := time.Now() // after hookbox took the first signal's time: see TestSecondSignalKillsExecCommands
	waitUntil(t, 20*time.Second, "a second Ctrl-C's delay", func() bool { return time.Since(first) > sameStop })
	select {
	case err := <-s.exited:
		t.Fatalf("exited after one signal, before its running work: %v\n%s", err, s.out.String())
	default:
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	if code := s.exitCode(t); code != 130 {
		t.Fatalf("second signal: exit %d, want 130\n%s", code, s.out.String())
	}
}

// TestSignalSentTwiceIsOneStop: a signal that comes with the first, as
// timeout(1) sends SIGTERM to its child and then to the child's process
// group, is the same stop; only one that comes sameStop or more later
// makes hookbox exit at once. (Two signals sent to a real process at once
// are often merged into one by the kernel, so the timing is tested here,
// and TestSecondSignalExitsAtOnce tests the real process.)
func TestSignalSentTwiceIsOneStop(t *testing.T) {
	sigs := make(chan os.Signal)
	// The time at each signal, in the order they are read.
	at := []time.Duration{0, time.Millisecond, sameStop + time.Millisecond}
	var reads atomic.Int64
	now := func() time.Time { return time.Unix(0, 0).Add(at[reads.Add(1)-1]) }
	cancelled := make(chan struct{})
	done := make(chan struct{})
	go func() {
		awaitSecondSignal(sigs, func() { close(cancelled) }, now)
		close(done)
	}()
	sigs <- syscall.SIGTERM
	<-cancelled
	sigs <- syscall.SIGTERM // to the process group, a moment later
	select {
	case sigs <- syscall.SIGINT: // a second stop, asked for later
	case <-done:
		t.Fatal("the same stop, signalled twice at once, was taken for a second stop")
	}
	<-done
}

// waitUntil polls cond until it holds, failing after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
