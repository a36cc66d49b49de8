//go:build linux

package target

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// awaitZombie waits (bounded) until pid has exited and waits to be reaped.
func awaitZombie(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if state, _, ok := procStat(pid); ok && state == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not exit", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReaperLeavesExecChildren: a command Exec started and has not waited
// for yet is left to exec.Cmd.Wait, which still reads its exit status; a
// child nobody waits for is reaped.
func TestReaperLeavesExecChildren(t *testing.T) {
	mine := exec.Command("/bin/sh", "-c", "exit 7")
	if err := startChild(mine, nil); err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("/bin/sh", "-c", "exit 0")
	if err := orphan.Start(); err != nil { // as if reparented: nobody waits
		t.Fatal(err)
	}
	awaitZombie(t, mine.Process.Pid)
	awaitZombie(t, orphan.Process.Pid)

	reapZombies()

	err := mine.Wait()
	childDone(mine.Process.Pid)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("Exec's child: Wait = %v, want exit status 7", err)
	}
	if err := syscall.Kill(orphan.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the other child was not reaped: Kill(pid, 0) = %v", err)
	}
}
