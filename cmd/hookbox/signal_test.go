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
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/syncbuf"
)

// signalHelperEnv makes the test binary run `hookbox serve` with main's
// signal handling, for TestSecondSignalExitsAtOnce; its value is the
// config file.
const signalHelperEnv = "HOOKBOX_TEST_SIGNAL_CONFIG"

// TestSecondSignalHelper is skipped unless TestSecondSignalExitsAtOnce
// starts it.
func TestSecondSignalHelper(t *testing.T) {
	cfg := os.Getenv(signalHelperEnv)
	if cfg == "" {
		t.Skip("run by TestSecondSignalExitsAtOnce")
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

// TestSecondSignalExitsAtOnce: the first SIGINT starts an orderly stop
// that waits for running work (here a command that sleeps, with a long
// shutdown_timeout); the second makes hookbox exit at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "" {
		t.Skip("in the helper")
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	started := filepath.Join(dir, "started")
	cfg := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: %q
db: "sqlite:%s"
shutdown_timeout: 60s
sources:
  - name: slow
    scheme: none
    exec: ["/bin/sh", "-c", "touch %s; sleep 60"]
    timeout: 120s
`, addr, filepath.Join(dir, "hookbox.db"), started)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), signalHelperEnv+"="+cfg)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

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
	cmd.Process.Signal(syscall.SIGINT)
	waitUntil(t, 20*time.Second, `"stopping" logged`, func() bool { return strings.Contains(out.String(), "stopping") })
	select {
	case err := <-exited:
		t.Fatalf("exited after one signal, before its running work: %v\n%s", err, out.String())
	default:
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("second signal: exit %v, want code 130\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after the second signal\n%s", out.String())
	}
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
