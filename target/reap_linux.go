//go:build linux

package target

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// Reaping orphans without stealing Exec's exit statuses.
//
// A process whose parent exits is reparented to PID 1 (or to the nearest
// child subreaper), which must wait for it once it exits, or it stays a
// zombie. When hookbox is PID 1 (a container without an init), the
// background processes of an exec command, killed with its process group,
// are reparented to hookbox: nothing reaps them unless hookbox does.
//
// A plain wait4(-1) loop would also reap the commands Exec is waiting for,
// and their exit status would be lost to exec.Cmd.Wait (ECHILD). So the
// reaper waits only for the exited children Exec is not waiting for: it
// finds zombie children in /proc and reaps each by its pid. Exec records
// its child's pid under a read lock taken around cmd.Start, and the reaper
// scans under the write lock, so it can never see a child of Exec's that
// is not yet recorded (starting and waiting, in children_unix.go).

// ReapOrphans reaps, until ctx ends, every child process of hookbox that
// has exited and that Exec is not itself waiting for: the orphans the
// kernel hands to PID 1. Run it (in its own goroutine) only when the
// process is PID 1 (os.Getpid() == 1) or a child subreaper, and only in a
// process whose other child processes, if any, are started by Exec: a
// child started some other way (os/exec directly) could be reaped before
// its own Wait, which would then fail.
//
// It is not needed otherwise: a real init reaps the orphans. hookbox does
// not make itself a subreaper; each command's supervisor is one, and
// kills and reaps what the command leaves (see killDescendants).
func ReapOrphans(ctx context.Context) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	defer signal.Stop(sigc)
	for {
		// Signals coalesce: each pass reaps every zombie there is, and a
		// SIGCHLD during a pass makes another one.
		reapZombies()
		select {
		case <-ctx.Done():
			return
		case <-sigc:
		}
	}
}

// reapZombies waits for each exited child that Exec is not waiting for.
func reapZombies() {
	starting.Lock()
	defer starting.Unlock()
	for _, pid := range zombieChildren() {
		waitingMu.Lock()
		mine := waiting[pid] != nil
		waitingMu.Unlock()
		if mine {
			continue // exec.Cmd.Wait reaps it and reads its status
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}
}

// zombieChildren returns the pids of this process's children that have
// exited and wait to be reaped, as /proc shows them.
func zombieChildren() []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		state, ppid, ok := procStat(pid)
		if ok && state == 'Z' && ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads the state and parent pid of pid from /proc/PID/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
	// the fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], ppid, true
}
