//go:build linux

package target_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
)

// reaperHelperEnv makes the test binary run TestReaperHelper for real.
const reaperHelperEnv = "HOOKBOX_TEST_REAPER_HELPER"

// TestReapOrphans runs TestReaperHelper in a child process that is a child
// subreaper (PR_SET_CHILD_SUBREAPER): orphans of its descendants are
// reparented to it as they would be to hookbox running as PID 1 in a
// container. The helper must end with no zombie children.
func TestReapOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a helper process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperHelper$", "-test.v")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReaperHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

// TestReaperHelper is the body of TestReapOrphans; it is skipped unless
// run as its helper. Five attempts whose script leaves a background
// process behind are killed when their context ends, while commands that leave
// short-lived orphans keep the reaper busy and four hundred quick commands
// run at the same time; every quick one must see its own exit status (the
// reaper must not take it), and no zombie may remain.
func TestReaperHelper(t *testing.T) {
	if os.Getenv(reaperHelperEnv) == "" {
		t.Skip("run by TestReapOrphans")
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	// Commands run directly: the test is about the reaper, and five
	// hundred starts of a supervisor (this test binary) on a small loaded
	// machine outlast the hanging attempts' timeout before their scripts
	// start. TestServeAsPID1ReapsOrphans (cmd/hookbox) runs supervised
	// commands as PID 1.
	target.SetSupervised(false)
	ctx, cancel := context.WithCancel(context.Background())
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		target.ReapOrphans(ctx)
	}()
	defer func() {
		cancel()
		<-reaped
	}()

	dir := t.TempDir()
	hang := script(t, dir, "hang.sh", `sleep 300 &
echo $! > "$PIDFILE"
wait
`)
	quickExit := script(t, dir, "quick.sh", "exit 0\n")
	failing := script(t, dir, "fail.sh", "exit 7\n")
	var wg sync.WaitGroup
	var pidfiles []string
	for i := range 5 {
		pidfile := filepath.Join(dir, fmt.Sprintf("grandchild.%d", i))
		pidfiles = append(pidfiles, pidfile)
		e := newExec(t, target.ExecOptions{Argv: []string{hang}, Env: []string{"PIDFILE=" + pidfile}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The attempt's context ends once the script has left its
			// background process behind (its pidfile holds a pid): a
			// fixed timeout (300 ms, then 2 s) ran out before the shell
			// started on a loaded machine, with four hundred other
			// commands starting meanwhile.
			actx, acancel := context.WithCancel(context.Background())
			defer acancel()
			delivered := make(chan struct{})
			go func() {
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					select {
					case <-delivered:
						return
					default:
					}
					if b, err := os.ReadFile(pidfile); err == nil {
						if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
							break
						}
					}
				}
				acancel()
			}()
			err := e.Deliver(actx, &hookbox.Event{ID: int64(i), Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
			close(delivered)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("hang %d: err = %v, want the attempt ended by its context", i, err)
			}
		}()
	}
	// Orphans dying all the while keep the reaper scanning.
	spawner := newExec(t, target.ExecOptions{Argv: []string{script(t, dir, "spawn.sh", `i=0
while [ $i -lt 20 ]; do (exit 0) & i=$((i+1)); done
exit 0
`)}})
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &hookbox.Event{ID: int64(i), Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
			for range 10 {
				if err := spawner.Deliver(context.Background(), ev); err != nil {
					t.Errorf("spawner %d: %v", i, err)
				}
			}
		}()
	}
	ok := newExec(t, target.ExecOptions{Argv: []string{quickExit}})
	bad := newExec(t, target.ExecOptions{Argv: []string{failing}})
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &hookbox.Event{ID: int64(i), Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
			for range 20 {
				if err := ok.Deliver(context.Background(), ev); err != nil {
					t.Errorf("quick %d: %v", i, err)
				}
				if err := bad.Deliver(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "exit code 7") {
					t.Errorf("failing %d: err = %v, want exit code 7", i, err)
				}
			}
		}()
	}
	wg.Wait()

	var grandchildren []int
	for _, f := range pidfiles {
		grandchildren = append(grandchildren, readPID(t, f))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		zombies := zombieChildren(t)
		if len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie children left 10s after the attempts ended: %v (grandchildren %v)", zombies, grandchildren)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, pid := range grandchildren {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("grandchild %d: Kill(pid, 0) = %v, want ESRCH (reaped)", pid, err)
		}
	}
}

// zombieChildren lists this process's children that have exited but were
// not reaped.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[0] == "Z" && fields[1] == strconv.Itoa(self) {
			out = append(out, pid)
		}
	}
	return out
}
