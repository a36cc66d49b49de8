//go:build linux

package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
// A process can leave the group: a descendant of the command that calls
// setsid (start-stop-daemon --background, a daemon library, setsid
// itself) is in a group of its own, which killing the command's group
// does not reach. So the supervisor is a child subreaper
// (PR_SET_CHILD_SUBREAPER): every descendant of the command whose parent
// exits is handed to the supervisor rather than to init, so that each
// one, in the group or out of it, stays its descendant. Before it kills
// its group, the supervisor kills its descendants, its children first,
// then the ones handed to it as each of those dies, until it has none
// left (killDescendants).
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
// group, and every process of the command that left it (setsid), when the
// attempt ends, when this process dies, even by SIGKILL, so that no
// process of an attempt outlives it or the program, and when the
// attempt's deadline passes, even while this process is stopped (SIGSTOP,
// a debugger), so that no command runs past its timeout. It costs one
// start of the program per attempt.
//
// A program that does not call it (a Go program that embeds hookbox's
// packages) runs each command directly: when the program dies without
// ending its attempts, the kernel kills each command (the process it
// started, PR_SET_PDEATHSIG), but not the processes that command started
// in the background, and a process that leaves the command's group
// (setsid) is not killed with it when the attempt ends either. Call
// KillRunning before os.Exit, and run the program where its processes
// are killed with it (a systemd unit, a container).
//
// Outside Linux it does nothing: commands run directly, and are not
// killed when the program dies (KillRunning still kills them), nor are
// the processes that leave their groups.
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
// zero). cmd.Cancel, called when the attempt's context ends, then asks the
// supervisor to kill the command and all it started (closing the stop
// pipe, the supervisor's fd 4) rather than killing the group at once,
// which would kill the supervisor before it could kill the processes
// that left the group (see killDescendants). It returns nil, and leaves
// cmd as it was, when commands are not supervised or cmd cannot start
// anyway (cmd.Err: its Start returns that error).
func supervisor(cmd *exec.Cmd, deadline time.Time) (*supervision, error) {
	if !supervised.Load() || cmd.Err != nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stopR, stopW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
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
	cmd.ExtraFiles = []*os.File{w, stopR}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	var once sync.Once
	stop := func() { once.Do(func() { stopW.Close() }) }
	// Should the supervisor not exit, exec.Cmd kills it after WaitDelay,
	// and Exec then kills its group.
	cmd.Cancel = func() error {
		stop()
		return nil
	}
	return &supervision{
		report:  r,
		started: func() { w.Close(); stopR.Close() },
		end:     stop,
	}, nil
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
	out, stop := os.NewFile(3, "report"), os.NewFile(4, "stop")
	for _, f := range []*os.File{out, stop} {
		if info, err := f.Stat(); err != nil || info.Mode()&fs.ModeNamedPipe == 0 {
			fmt.Fprintln(os.Stderr, "hookbox: "+superviseArg+": no report or stop pipe")
			return 2
		}
	}
	syscall.CloseOnExec(3) // never the command's
	syscall.CloseOnExec(4)
	// Orphaned descendants of the command come to the supervisor, which
	// kills them with the rest (see killDescendants). On a kernel without
	// it (before 3.4) they go to init, out of reach, as without a
	// supervisor.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// The command's parent-death signal follows this thread (see
	// lockForParentDeath); the supervisor never unlocks it.
	runtime.LockOSThread()

	// SIGTERM comes when hookbox dies (Pdeathsig). The others are caught
	// too (so that they do not end the supervisor alone, leaving the
	// command unwatched, or stop it, leaving the deadline unheld), and,
	// like SIGTERM when hookbox lives, left to the command: a signal sent
	// to the group reaches it as well, as it did without a supervisor.
	// Those are every signal that ends or stops a Go program but SIGKILL
	// and SIGSTOP, which no process can catch, and SIGSEGV, SIGBUS and
	// SIGFPE, which are the runtime's own faults: the kernel sends SIGTTIN
	// and SIGTTOU to a background group that touches the terminal, and a
	// command's kill -ABRT 0 ended the supervisor, whose exit was then
	// taken for a want of processes and never charged. A caught signal is
	// reset to its default in the command when it starts; one the
	// supervisor was started with ignored (SIGHUP under nohup) is left
	// ignored, for the command too, as it was without a supervisor.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGSTKFLT, syscall.SIGSYS,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU} {
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
	// Exec closes the stop pipe when the attempt's context ends (a
	// timeout, a shutdown), and the kernel does when hookbox dies.
	stopped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stop)
		close(stopped)
	}()
	var deadline <-chan time.Time
	if at != 0 {
		deadline = time.After(time.Duration(at - monotonic()))
	}
	for {
		select {
		case <-stopped:
			killOwnGroup()
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

// killOwnGroup kills every descendant of the supervisor (see
// killDescendants) and then sends SIGKILL to its process group: the
// supervisor and every process of the command left there.
func killOwnGroup() {
	killDescendants(descendantsWait)
	syscall.Kill(0, syscall.SIGKILL)
	os.Exit(137) // not reached
}

// descendantsWait bounds how long killDescendants waits for killed
// processes to exit: one stuck in the kernel (an NFS server that does not
// answer) dies only when that ends, and the attempt does not wait for it.
const descendantsWait = time.Second

// killDescendants kills every descendant of the supervisor, a child
// subreaper: the command, if it still runs, and whatever it started, in
// its process group or out of it (setsid). It sends SIGKILL to each
// child and reaps those that exited; a killed child's own children are
// handed to the supervisor before its exit can be reaped, so the next
// round finds and kills them. It returns when no child is left (ECHILD),
// or after wait, the rest killed but not reaped.
//
// A pid it kills is always its own child's: a child's pid is not reused
// before the supervisor reaps it, and only the supervisor reaps its
// children (the command's exec.Cmd.Wait, if it still waits, gets the
// error).
func killDescendants(wait time.Duration) {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		// Reap what has exited; with no child at all (the common case
		// once the command has been waited for), there is nothing to
		// kill.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: none left
			}
			if pid <= 0 {
				break // children left, none exited
			}
		}
		if time.Now().After(deadline) {
			return
		}
		for _, pid := range ownChildren() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// ownChildren returns the pids of the calling process's children: those
// /proc/self/task/*/children lists, or, on a kernel without those files,
// the processes whose parent /proc/PID/stat says it is.
func ownChildren() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var pids []int
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if errors.Is(err, fs.ErrNotExist) && len(pids) == 0 {
			return childrenByStat()
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// childrenByStat returns the pids of the processes whose parent is the
// calling process, by reading every /proc/PID/stat.
func childrenByStat() []int {
	names, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(pid); ok && ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids
}
