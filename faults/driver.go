package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binary is a built hookbox executable.
type Binary struct {
	Path string
}

// Build compiles github.com/hookbox/hookbox/cmd/hookbox into dir, with the
// race detector when race is set (so that a race-enabled test run shares the
// build cache with it and checks the server too). It must run inside the
// module.
func Build(ctx context.Context, dir string, race bool) (*Binary, error) {
	// go test puts the go command of the running toolchain first in PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("find the go command: %w", err)
	}
	out := filepath.Join(dir, "hookbox")
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/hookbox/hookbox/cmd/hookbox")
	cmd := exec.CommandContext(ctx, goTool, args...)
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg.Bytes())
	}
	return &Binary{Path: out}, nil
}

// Process is one running `hookbox serve`.
type Process struct {
	cmd     *exec.Cmd
	addr    string
	logPath string

	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, set before exited closes
}

// startTimeout bounds how long a child may take to listen (migrations on a
// race-enabled build under load included).
const startTimeout = 60 * time.Second

// Start runs `hookbox serve --config configPath --listen 127.0.0.1:0` and
// returns once it listens. The config must set log.format json: the
// address is read from the "listening" log line. Everything the child
// writes to stderr goes to logPath (created or truncated). env is added to
// the environment.
func (b *Binary) Start(configPath, logPath string, env ...string) (*Process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	addrc := make(chan string, 1)
	logs := &logWriter{w: bufio.NewWriterSize(f, 64<<10), addrc: addrc}
	cmd := exec.Command(b.Path, "serve", "--config", configPath, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logs
	// Stop waiting for stderr once the child is gone, even if something it
	// started still holds the pipe.
	cmd.WaitDelay = 5 * time.Second
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait() // returns after the last write to logs
		logs.w.Flush()
		f.Close()
		close(p.exited)
	}()
	select {
	case p.addr = <-addrc:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("hookbox serve exited before listening: %v; log %s:\n%s", p.err, logPath, Tail(logPath, 4096))
	case <-time.After(startTimeout):
		p.Kill()
		return nil, fmt.Errorf("hookbox serve did not listen within %s; log %s:\n%s", startTimeout, logPath, Tail(logPath, 4096))
	}
}

// Addr is the host:port the process listens on.
func (p *Process) Addr() string { return p.addr }

// URL is http://Addr.
func (p *Process) URL() string { return "http://" + p.addr }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; it returns
// the exit error (nil for exit status 0). After the timeout the process is
// killed and an error returned.
func (p *Process) Stop(timeout time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("no clean exit within %s after SIGTERM", timeout)
	}
}

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// logWriter buffers the child's stderr into its log file and sends the
// address of the first "listening" JSON log line to addrc. os/exec calls
// Write from one goroutine.
type logWriter struct {
	w       *bufio.Writer
	addrc   chan<- string
	sent    bool
	partial []byte // the start of a line not yet ended, until the address is found
}

func (l *logWriter) Write(b []byte) (int, error) {
	l.w.Write(b)
	if l.sent {
		return len(b), nil
	}
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i]
		l.partial = l.partial[i+1:]
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if bytes.Contains(line, []byte(`"listening"`)) && json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			l.addrc <- rec.Addr
			l.sent, l.partial = true, nil
			l.w.Flush()
			break
		}
	}
	if len(l.partial) > 1<<20 {
		l.partial = nil // no line is that long; drop it
	}
	return len(b), nil
}

// LogTail returns the last n bytes of the process's log (complete once the
// process has exited).
func (p *Process) LogTail(n int) string { return Tail(p.logPath, n) }

// RaceReports counts the race detector's reports in the process's log.
func (p *Process) RaceReports() int {
	b, _ := os.ReadFile(p.logPath)
	return bytes.Count(b, []byte("WARNING: DATA RACE"))
}

// Tail returns the last n bytes of the file at path (a process log), or
// the error that kept it from being read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
