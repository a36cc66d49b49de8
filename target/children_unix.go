//go:build unix

package target

import (
	"errors"
	"os/exec"
	"sync"
	"time"
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
	// waiting holds the commands Exec is waiting for, by pid; each pid is
	// also the id of the command's process group.
	waiting   = map[int]*child{}
	waitingMu sync.Mutex
)

// child is a command Exec waits for.
type child struct {
	// stop, for a supervised command, asks its supervisor to kill it and
	// every process it started, in its group or not (nil: the command
	// runs directly).
	stop func()
	// done is closed once exec.Cmd.Wait has reaped it.
	done chan struct{}
}

// errExiting is why a command does not start after KillRunning.
var errExiting = errors.New("not started: the process is exiting (target.KillRunning was called)")

// startChild starts cmd and records it as a child Exec will wait for;
// stop is child.stop.
func startChild(cmd *exec.Cmd, stop func()) error {
	starting.RLock()
	defer starting.RUnlock()
	if exiting {
		return errExiting
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	waitingMu.Lock()
	waiting[cmd.Process.Pid] = &child{stop: stop, done: make(chan struct{})}
	waitingMu.Unlock()
	return nil
}

// childDone forgets pid once exec.Cmd.Wait has reaped it.
func childDone(pid int) {
	waitingMu.Lock()
	if c := waiting[pid]; c != nil {
		close(c.done)
	}
	delete(waiting, pid)
	waitingMu.Unlock()
}

// KillRunning kills every exec command running now, with everything it
// started, and makes every later attempt fail without starting its
// command. It is for a program about to exit at once, without letting its
// attempts end (hookbox at a second SIGINT or SIGTERM): the commands would
// otherwise run on after it, with no timeout, and the next process would
// run their events again beside them. The attempts it cuts short end with
// an error to retry.
//
// A command run directly has its process group killed (SIGKILL). A
// supervised one's supervisor is asked to kill it and every process it
// started, also those that left its group (see killDescendants);
// KillRunning waits for it, and kills the group of any supervisor that
// has not exited within execWaitDelay (one that was stopped, say).
//
// On Linux, when the program called ExecSupervisor, each command is
// killed anyway when the program exits, however it exits; KillRunning
// matters for the other systems, and for programs that embed hookbox
// without calling ExecSupervisor.
func KillRunning() {
	starting.Lock()
	exiting = true
	asked := map[int]*child{}
	waitingMu.Lock()
	for pgid, c := range waiting {
		if c.stop == nil {
			killGroup(pgid)
			continue
		}
		c.stop()
		asked[pgid] = c
	}
	waitingMu.Unlock()
	// No command starts from now on (exiting): the wait below needs the
	// lock no more, and the reaping of orphans (reapZombies) takes it.
	starting.Unlock()
	timeout := time.NewTimer(execWaitDelay)
	defer timeout.Stop()
	for pgid, c := range asked {
		select {
		case <-c.done:
		case <-timeout.C:
			for pgid := range asked {
				killGroup(pgid)
			}
			return
		}
		delete(asked, pgid)
	}
}
