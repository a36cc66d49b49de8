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
)

func supported() error { return nil }

// run executes one attempt. The command gets pipes this function owns
// (rather than ones os/exec copies through), so that the moment the command
// itself exits the rest of its process group can be killed, and a
// background process that still holds the output cannot hold up the
// attempt.
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

	if err := startChild(cmd); err != nil {
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

	if waitErr == nil {
		e.logOutput(ctx, ev, out)
		return nil
	}
	var ee *exec.ExitError
	var what string
	switch {
	case ctx.Err() != nil:
		what = fmt.Sprintf("%v; process group killed", ctx.Err())
	case errors.As(waitErr, &ee) && ee.ExitCode() >= 0:
		what = fmt.Sprintf("exit code %d", ee.ExitCode())
	case errors.As(waitErr, &ee):
		what = ee.ProcessState.String() // "signal: killed"
	default:
		what = waitErr.Error()
	}
	text := out.String()
	if text == "" {
		text = "(no output)"
	}
	err = fmt.Errorf("exec: %s: %s; output: %s", e.name(), what, text)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &wrapped{text: err.Error(), err: ctxErr}
	}
	return err
}

// startError explains err, a failure to start the command. The child
// changes to the working directory before it runs the command, and a
// missing directory comes back as the command's own "fork/exec …: no
// such file or directory", which sends the reader after the wrong path.
func (e *Exec) startError(err error) error {
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
