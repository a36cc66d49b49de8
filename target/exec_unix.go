//go:build unix

package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/worker"
)

func supported() error { return nil }

// run executes one attempt. The command gets pipes this function owns
// (rather than ones os/exec copies through), so that the moment the command
// itself exits the rest of its process group can be killed, and a
// background process that still holds the output cannot hold up the
// attempt. When ExecSupervisor was called, the command runs under a
// supervisor (see supervise_linux.go), which leads its process group in
// its place and reports its exit status.
func (e *Exec) run(ctx context.Context, ev *hookbox.Event) error {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("exec: %s: stdin pipe: %w", e.name(), err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return fmt.Errorf("exec: %s: output pipe: %w", e.name(), err)
	}

	cmd := exec.CommandContext(ctx, e.argv[0], e.argv[1:]...)
	cmd.Dir = e.dir
	cmd.Env = append(e.environ(os.Environ(), ev), tracing.Env(ctx)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, outW
	// Its own process group, so the command and everything it starts can
	// be killed together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = execWaitDelay
	deadline, _ := ctx.Deadline()
	sup, err := supervisor(cmd, deadline)
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return fmt.Errorf("exec: %s: supervisor's pipes: %w", e.name(), err)
	}
	if sup != nil {
		defer sup.report.Close()
		defer sup.end()
	}
	defer lockForParentDeath(cmd.SysProcAttr)()

	var stop func()
	if sup != nil {
		stop = sup.end
	}
	err = startChild(cmd, stop)
	if sup != nil {
		sup.started()
	}
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return fmt.Errorf("exec: %s: %w", e.name(), e.startError(err))
	}
	// The child holds its own copies now.
	stdinR.Close()
	outW.Close()
	pgid := cmd.Process.Pid

	var closeStdin sync.Once
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		stdinW.Write(ev.Payload) // EPIPE when the command does not read it all: fine
		closeStdin.Do(func() { stdinW.Close() })
	}()
	out := &tailBuffer{limit: e.limit, red: e.red}
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(out, outR)
	}()

	waitErr := cmd.Wait()
	childDone(pgid)
	// The command has exited (or was killed with its group when ctx ended).
	// Kill whatever it left behind in its group.
	killGroup(pgid)
	closeStdin.Do(func() { stdinW.Close() }) // unblocks a Write nobody reads
	<-fed
	select {
	case <-read:
	case <-time.After(execWaitDelay):
		// A process that left the group (setsid) still holds the output.
	}
	outR.Close()
	<-read

	var status *syscall.WaitStatus // how the command ended, when it did
	timedOut := false              // the supervisor killed it at the deadline
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		ws, _ := ee.Sys().(syscall.WaitStatus)
		status = &ws
	}
	if sup != nil {
		// The supervisor has exited: its report says how the command
		// ended. Without one (the supervisor killed its group when ctx
		// ended, or was killed by someone else) its own end is the
		// command's.
		st, late, startErr := supervisorResult(sup.report)
		switch {
		case startErr != nil:
			return fmt.Errorf("exec: %s: %w", e.name(), e.startError(startErr))
		case late:
			timedOut = true
		case st != nil:
			status, waitErr = st, nil
			if !st.Exited() || st.ExitStatus() != 0 {
				waitErr = errors.New(waitText(*st))
			}
		case status != nil && status.Exited() && ctx.Err() == nil:
			// The supervisor ends killed, with its group, once it has
			// reported; one that exited instead, saying nothing, failed
			// itself: its Go runtime died (exit code 2), most often
			// because it could not start a thread (the process limit,
			// a pids cgroup) or get memory. That is this process's
			// failure, not the command's answer.
			head := fmt.Sprintf("exec: %s: the supervisor (hookbox's own process) exited with %s before reporting on the command "+
				"(most often for want of processes or memory); output: ", e.name(), waitText(*status))
			return worker.Exhausted(errors.New(head + out.Last(max(worker.MaxErrorText-len(head)-len("…")-errorSlack, 0))))
		}
	}

	if waitErr == nil {
		e.logOutput(ctx, ev, out)
		return nil
	}
	ctxErr := ctx.Err()
	if ctxErr == nil && timedOut {
		// The supervisor's timer fired before ctx's own: the same end.
		ctxErr = context.DeadlineExceeded
	}
	var what string
	permanent := false // the command refused the event for good
	switch {
	case ctxErr != nil:
		what = fmt.Sprintf("%v; process group killed", ctxErr)
	case status != nil:
		what = waitText(*status)
		if permanent = status.Exited() && e.permanent[status.ExitStatus()]; permanent {
			what += " (in permanent_exit_codes: not retried)"
		}
	default:
		what = waitErr.Error()
	}
	// The end of the output, as much as the stored error holds: cut at
	// the front only, never by the worker in its middle.
	head := fmt.Sprintf("exec: %s: %s; output: ", e.name(), what)
	text := out.Last(max(worker.MaxErrorText-len(head)-len("…")-errorSlack, 0))
	if text == "" {
		text = "(no output)"
	}
	err = errors.New(head + text)
	switch {
	case ctxErr != nil:
		return &wrapped{text: err.Error(), err: ctxErr}
	case permanent:
		return worker.Permanent(err)
	}
	return err
}

// supervision is a command's supervisor, from Exec's side (see
// supervise_linux.go).
type supervision struct {
	// report is the read end of the pipe the supervisor reports on.
	report *os.File
	// started closes this process's copies of the supervisor's ends of
	// the pipes, once it has started or failed to.
	started func()
	// end closes the stop pipe, asking the supervisor to kill the
	// command and all it started, if cmd.Cancel or KillRunning did not;
	// once the attempt is over, it only releases the pipe.
	end func()
}

// startError explains err, a failure to start the command. The child
// changes to the working directory before it runs the command, and a
// missing directory comes back as the command's own "fork/exec …: no
// such file or directory", which sends the reader after the wrong path.
//
// A fork refused for want of processes (EAGAIN: RLIMIT_NPROC, the
// system's or the cgroup's pids limit) or of memory (ENOMEM) is this
// process's failure, not the command's: worker.Exhausted, so the attempt
// is given back instead of charged.
func (e *Exec) startError(err error) error {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) {
		return worker.Exhausted(err)
	}
	if e.dir == "" {
		return err
	}
	info, serr := os.Stat(e.dir)
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		return fmt.Errorf("working directory %s (exec_dir) does not exist: %w", e.dir, err)
	case serr == nil && !info.IsDir():
		return fmt.Errorf("working directory %s (exec_dir) is not a directory: %w", e.dir, err)
	}
	return err
}

// waitText says how a command that ended with ws ended: "exit code 3",
// or as os.ProcessState says it, "signal: killed".
func waitText(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit code %d", ws.ExitStatus())
	case ws.Signaled():
		s := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			s += " (core dumped)"
		}
		return s
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// wrapped is an error with its own text that still matches err.
type wrapped struct {
	text string
	err  error
}

func (w *wrapped) Error() string { return w.text }
func (w *wrapped) Unwrap() error { return w.err }
