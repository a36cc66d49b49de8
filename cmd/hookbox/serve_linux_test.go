//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pid1HelperEnv makes the test binary run `hookbox serve` for
// TestServeAsPID1ReapsOrphans; its value is the config file.
const pid1HelperEnv = "HOOKBOX_TEST_PID1_CONFIG"

// TestServeAsPID1Helper runs `hookbox serve` until SIGTERM; it is skipped
// unless TestServeAsPID1ReapsOrphans starts it.
func TestServeAsPID1Helper(t *testing.T) {
	cfg := os.Getenv(pid1HelperEnv)
	if cfg == "" {
		t.Skip("run by TestServeAsPID1ReapsOrphans")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestServeAsPID1ReapsOrphans runs `hookbox serve` as PID 1 of a new PID
// namespace, as in a container without an init. Five events run a command
// that leaves a background process behind and is killed by its timeout;
// the killed background processes are reparented to hookbox, which must
// reap them: no zombie may remain.
func TestServeAsPID1ReapsOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hookbox in a PID namespace")
	}
	if err := exec.Command("unshare", "-p", "-f", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("cannot create a PID namespace here (unshare: %v)", err)
	}
	dir := t.TempDir()
	hang := filepath.Join(dir, "hang.sh")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nsleep 300 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hookbox.yaml")
	yaml := fmt.Sprintf(`db: "sqlite:%s"
sources:
  - name: hang
    scheme: none
    exec: [%q]
    timeout: 300ms
    max_attempts: 1
`, filepath.Join(dir, "hookbox.db"), hang)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-p", "-f", "--mount-proc", os.Args[0], "-test.run=^TestServeAsPID1Helper$")
	cmd.Env = append(os.Environ(), pid1HelperEnv+"="+cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // unshare; hookbox dies with its namespace below
		cmd.Wait()
	})

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	addrRE := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var addr string
	var logged []string
	timeout := time.After(20 * time.Second)
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("hookbox exited before listening:\n%s", strings.Join(logged, "\n"))
			}
			logged = append(logged, l)
			if m := addrRE.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		case <-timeout:
			t.Fatalf("hookbox did not listen within 20s:\n%s", strings.Join(logged, "\n"))
		}
	}
	hookbox := childOf(t, cmd.Process.Pid)
	t.Cleanup(func() { syscall.Kill(hookbox, syscall.SIGKILL) })

	for i := range 5 {
		resp, err := http.Post("http://"+addr+"/webhooks/hang", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ingest %d: status %d", i, resp.StatusCode)
		}
	}
	dead := 0
	for dead < 5 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("hookbox exited:\n%s", strings.Join(logged, "\n"))
			}
			logged = append(logged, l)
			if strings.Contains(l, `msg="event dead"`) {
				dead++
			}
		case <-timeout:
			t.Fatalf("%d of 5 events dead after 20s:\n%s", dead, strings.Join(logged, "\n"))
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		zombies := zombiesOf(t, hookbox)
		if len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookbox (PID 1) left %d zombie children 10s after the attempts: %v", len(zombies), zombies)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(hookbox, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("hookbox did not stop cleanly on SIGTERM: %v\n%s", err, strings.Join(logged, "\n"))
	}
}

// childOf returns the pid of the only child of pid (as this namespace
// numbers it), waiting for it to appear.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if kids := procChildren(t, pid, false); len(kids) == 1 {
			return kids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has no single child", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombiesOf lists pid's children that exited and were not reaped.
func zombiesOf(t *testing.T, pid int) []int { return procChildren(t, pid, true) }

// procChildren lists the children of pid from /proc, only zombies if asked.
func procChildren(t *testing.T, pid int, zombies bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && (!zombies || f[0] == "Z") {
			out = append(out, child)
		}
	}
	return out
}
