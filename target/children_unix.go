//go:build unix

package target

import (
	"errors"
	"os/exec"
	"sync"
)

// The commands Exec is running, by the pid of their process group's
// leader (the command itself, or its supervisor; see supervise_linux.go).
var (
	// starting is read-locked while Exec starts a command and records it,
	// write-locked by the orphan reaper while it scans (reap_linux.go) and
	// by KillRunning, so that neither sees a child not yet recorded.
	starting sync.RWMutex
	// exiting is set by KillRunning (under starting's write lock): no
	// command starts after it.
	exiting bool
	// waiting holds the pids of the commands Exec is waiting for; each is
	// also the id of the command's process group.
	waiting   = map[int]bool{}
	waitingMu sync.Mutex
)

// errExiting is why a command does not start after KillRunning.
var errExiting = errors.New("not started: the process is exiting (target.KillRunning was called)")

// startChild starts cmd and records it as a child Exec will wait for.
func startChild(cmd *exec.Cmd) error {
	starting.RLock()
	defer starting.RUnlock()
	if exiting {
		return errExiting
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	waitingMu.Lock()
	waiting[cmd.Process.Pid] = true
	waitingMu.Unlock()
	return nil
}

// childDone forgets pid once exec.Cmd.Wait has reaped it.
func childDone(pid int) {
	waitingMu.Lock()
	delete(waiting, pid)
	waitingMu.Unlock()
}

// KillRunning sends SIGKILL to the process group of every exec command
// running now, and makes every later attempt fail without starting its
// command. It is for a program about to exit at once, without letting its
// attempts end (hookbox at a second SIGINT or SIGTERM): the commands would
// otherwise run on after it, with no timeout, and the next process would
// run their events again beside them. The attempts it cuts short end with
// an error to retry.
//
// On Linux, when the program called ExecSupervisor, each command's group is
// killed anyway when the program exits, however it exits; KillRunning
// matters for the other systems, and for programs that embed hookbox
// without calling ExecSupervisor.
func KillRunning() {
	starting.Lock()
	defer starting.Unlock()
	exiting = true
	waitingMu.Lock()
	defer waitingMu.Unlock()
	for pgid := range waiting {
		killGroup(pgid)
	}
}
