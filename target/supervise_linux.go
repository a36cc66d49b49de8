//go:build linux

package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supervising exec commands, so that none outlives hookbox.
//
// A command runs in its own process group, which Exec kills when the
// attempt ends. If hookbox itself dies without running its code (SIGKILL,
// the OOM killer) nothing would kill that group: the command would run on
// with no timeout, and once its event's lease ended the next hookbox would
// run the event again beside it. The kernel can signal a child when its
// parent dies (PR_SET_PDEATHSIG), but only that child, not the group.
//
// So in a program that called ExecSupervisor (hookbox's main does) each
// command is started through a supervisor: the running executable started
// again (/proc/self/exe, the same binary even if the file was replaced
// since) with superviseArg as its first argument. The supervisor leads the
// command's process group and gets SIGTERM when hookbox dies; it starts the
// command (the same path, arguments, directory, environment, stdin and
// output), waits for it, reports its exit status (or why it could not
// start) on a pipe at fd 3, and then kills its whole group, itself
// included. If hookbox has died, it kills the group at once. Exec still
// kills the group itself when the attempt's context ends, as it does
// without a supervisor.
//
// The supervisor also gets the attempt's deadline, and kills the group
// itself when it passes (SIGKILL, as Exec's own timeout kill), reporting
// a timeout. So the timeout holds while hookbox is stopped rather than
// dead (SIGSTOP, a debugger) and runs none of its own code. The event's
// lease, which hookbox no longer extends then, ends about a timeout after
// the deadline (it is twice the timeout, see worker), so no other process
// runs the event beside a command still running it.

// superviseArg, as the first argument, makes ExecSupervisor run the
// supervisor. It is no cobra command: it is never listed, and the
// command's own arguments are never parsed as flags.
const superviseArg = "__hookbox-exec-supervisor"

// selfExe is the running executable, whatever happened to its file.
const selfExe = "/proc/self/exe"

// supervised is set by ExecSupervisor: Exec starts commands through a
// supervisor.
var supervised atomic.Bool

// ExecSupervisor is for the main function of a program that runs exec
// targets, such as hookbox's: call it first, before anything else. When the
// process was started by Exec as the supervisor of a command, it runs that
// command and exits, never returning. Otherwise it returns, and from then
// on each Exec attempt starts its command through a supervisor: a copy of
// this program that leads the command's process group and kills the whole
// group when this process dies, even by SIGKILL, so that no process of an
// attempt outlives the program, and when the attempt's deadline passes,
// even while this process is stopped (SIGSTOP, a debugger), so that no
// command runs past its timeout. It costs one start of the program per
// attempt.
//
// A program that does not call it (a Go program that embeds hookbox's
// packages) runs each command directly: when the program dies without
// ending its attempts, the kernel kills each command (the process it
// started, PR_SET_PDEATHSIG), but not the processes that command started
// in the background. Call KillRunning before os.Exit, and run the program
// where its processes are killed with it (a systemd unit, a container).
//
// Outside Linux it does nothing: commands run directly, and are not
// killed when the program dies (KillRunning still kills them).
func ExecSupervisor() {
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(supervise(os.Args[2:]))
	}
	if _, err := os.Stat(selfExe); err == nil {
		supervised.Store(true)
	}
}

// report is what the supervisor tells Exec on fd 3: the command's wait
// status, or why it could not start.
type report struct {
	Started bool `json:"started"`
	Status  int  `json:"status"` // a syscall.WaitStatus
	// TimedOut: the attempt's deadline passed and the supervisor killed
	// the group (Status is then unset).
	TimedOut bool `json:"timed_out,omitempty"`
	// When the command did not start: os/exec's *os.PathError, in parts
	// when it is one (Errno 0 when its cause is no errno), else its text.
	Op    string `json:"op,omitempty"`
	Path  string `json:"path,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"err,omitempty"`
}

// startError is the error the supervisor reported, rebuilt as close to
// the original as it goes.
func (r *report) startError() error {
	switch {
	case r.Op != "" && r.Errno != 0:
		return &os.PathError{Op: r.Op, Path: r.Path, Err: syscall.Errno(r.Errno)}
	case r.Op != "":
		return &os.PathError{Op: r.Op, Path: r.Path, Err: errors.New(r.Err)}
	}
	return errors.New(r.Err)
}

// supervisor prepares cmd, set up to run the command directly, to run it
// through a supervisor instead, which kills it at deadline (none when
// zero), and returns the read end of the report pipe (closed by the
// caller), with a func to call once cmd has started or failed to. It
// returns nil, and leaves cmd as it was, when commands are not supervised
// or cmd cannot start anyway (cmd.Err: its Start returns that error).
func supervisor(cmd *exec.Cmd, deadline time.Time) (r *os.File, started func(), err error) {
	if !supervised.Load() || cmd.Err != nil {
		return nil, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	at := int64(0) // no deadline
	if !deadline.IsZero() {
		// Read after the time left, so never before the deadline: the
		// supervisor kills no sooner than Exec's own timer would.
		left := int64(time.Until(deadline))
		now := monotonic()
		if left <= math.MaxInt64-now { // else past the clock's range: never
			at = max(now+left, 1)
		}
	}
	cmd.Args = append([]string{os.Args[0], superviseArg, strconv.Itoa(os.Getpid()), strconv.FormatInt(at, 10), cmd.Dir, cmd.Path}, cmd.Args...)
	cmd.Path = selfExe
	cmd.Dir = "" // the supervisor changes to it for the command
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return r, func() { w.Close() }, nil
}

// supervisorResult reads the report of the supervisor, which has exited.
// It returns the command's wait status, or that the supervisor killed it
// at the deadline, or why it did not start; nothing when there is no
// report (the supervisor was killed first).
func supervisorResult(r *os.File) (status *syscall.WaitStatus, timedOut bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil || len(b) == 0 {
		return nil, false, nil
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, false, fmt.Errorf("supervisor's report: %w", err)
	}
	switch {
	case !rep.Started:
		return nil, false, rep.startError()
	case rep.TimedOut:
		return nil, true, nil
	}
	ws := syscall.WaitStatus(rep.Status)
	return &ws, false, nil
}

// monotonic reads CLOCK_MONOTONIC, in nanoseconds: the clock of Go's
// timers, one for every process of the system, so a deadline read on it
// means the same in the supervisor as in hookbox.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("hookbox: CLOCK_MONOTONIC: " + err.Error()) // Linux always has it
	}
	return ts.Nano()
}

// lockForParentDeath makes the child about to start get its parent-death
// signal only when this process dies. The kernel sends it when the thread
// that started the child ends, and the Go runtime ends a thread when a
// goroutine locked to it returns: the caller keeps its goroutine on this
// thread until the child has exited, by calling the func returned.
func lockForParentDeath(attr *syscall.SysProcAttr) (unlock func()) {
	if attr.Pdeathsig == 0 {
		// Run directly: the command itself is killed when this process
		// dies; what it starts is not.
		attr.Pdeathsig = syscall.SIGKILL
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// supervise is the supervisor's main: args are hookbox's pid, the
// attempt's deadline (a monotonic reading, 0 for none), the command's
// directory, its path and its argv. It returns an exit status only when it
// could not run; otherwise it ends killed, with its group.
func supervise(args []string) int {
	if len(args) < 5 {
		fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+" is started by hookbox for its exec targets, not by hand")
		return 2
	}
	parent, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+": bad parent pid")
		return 2
	}
	at, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+": bad deadline")
		return 2
	}
	args = args[1:]
	if syscall.Getpgrp() != os.Getpid() {
		// It ends by killing its process group: only ever its own.
		fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+": not the leader of its process group")
		return 2
	}
	out := os.NewFile(3, "report")
	if out == nil {
		fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+": no report pipe")
		return 2
	}
	syscall.CloseOnExec(3) // never the command's
	// The command's parent-death signal follows this thread (see
	// lockForParentDeath); the supervisor never unlocks it.
	runtime.LockOSThread()

	// SIGTERM comes when hookbox dies (Pdeathsig). The others are caught
	// too (so that they do not end the supervisor alone, leaving the
	// command unwatched), and, like SIGTERM when hookbox lives, left to
	// the command: a signal sent to the group reaches it as well, as it
	// did without a supervisor. A caught signal is reset to its default in
	// the command when it starts; one the supervisor was started with
	// ignored (SIGHUP under nohup) is left ignored, for the command too,
	// as it was without a supervisor.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	if os.Getppid() != parent {
		killOwnGroup() // hookbox died before the signal was caught
	}

	cmd := &exec.Cmd{
		Path: args[2], Args: args[3:], Dir: args[1], Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		rep := report{Err: err.Error()}
		var pe *os.PathError
		if errors.As(err, &pe) {
			rep.Op, rep.Path, rep.Err = pe.Op, pe.Path, pe.Err.Error()
			var errno syscall.Errno
			if errors.As(pe.Err, &errno) {
				rep.Errno = int(errno)
			}
		}
		writeReport(out, rep)
		return 0
	}
	// The command holds its stdin now; hookbox's writes to it fail as
	// soon as the command no longer reads, as they did without a
	// supervisor.
	os.Stdin.Close()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	var deadline <-chan time.Time
	if at != 0 {
		deadline = time.After(time.Duration(at - monotonic()))
	}
	for {
		select {
		case <-sigs:
			if os.Getppid() != parent {
				killOwnGroup() // hookbox died
			}
		case <-deadline:
			select {
			case <-done:
				deadline = nil // it ended first: report how
				continue
			default:
			}
			writeReport(out, report{Started: true, TimedOut: true})
			killOwnGroup()
		case <-done:
			var ws syscall.WaitStatus
			ok := cmd.ProcessState != nil
			if ok {
				ws, ok = cmd.ProcessState.Sys().(syscall.WaitStatus)
			}
			if !ok {
				killOwnGroup() // no report: the attempt fails as killed
			}
			writeReport(out, report{Started: true, Status: int(ws)})
			// What the command left behind in its group goes, and the
			// supervisor with it.
			killOwnGroup()
		}
	}
}

// writeReport writes rep to w and closes it. It fits in the pipe's buffer,
// so it never waits for hookbox to read.
func writeReport(w *os.File, rep report) {
	b, _ := json.Marshal(rep)
	w.Write(b)
	w.Close()
}

// killOwnGroup sends SIGKILL to the caller's process group: the
// supervisor and every process of the command.
func killOwnGroup() {
	syscall.Kill(0, syscall.SIGKILL)
	os.Exit(137) // not reached
}
