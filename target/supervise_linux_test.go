package target_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/target"
)

// Environment of TestExecHelper, the process that plays hookbox in these
// tests: the directory to work in, how to run commands, what to do.
const (
	execHelperDir  = "HOOKBOX_TEST_EXEC_HELPER_DIR"
	execHelperMode = "HOOKBOX_TEST_EXEC_HELPER_MODE" // "supervised" or "direct"
	execHelperDo   = "HOOKBOX_TEST_EXEC_HELPER_DO"   // "hang", "killrunning", "timeout" or "signals"
)

// helperTimeout is the attempt's timeout in the helper's "timeout" mode:
// long enough for the test to stop the helper before it passes, on a
// loaded machine too.
const helperTimeout = 3 * time.Second

// groupScript is a command that starts a background process and records
// both pids ("leader child") in $DIR/pids, then waits. It ignores SIGTERM,
// and so does its child, so only SIGKILL ends them.
const groupScript = `trap '' TERM
sleep 300 &
echo $$ $! > "$DIR/pids.tmp"
mv "$DIR/pids.tmp" "$DIR/pids"
wait
`

// TestExecHelper is the process that runs Exec in the tests below; it is
// skipped unless one of them starts it. "hang" runs groupScript until the
// helper is killed. "timeout" runs it with helperTimeout, having written
// the attempt's deadline (Unix nanoseconds) to $DIR/deadline, and checks
// that the attempt failed as timed out. "killrunning" runs it, calls
// target.KillRunning once the pids are written, and then checks that the
// attempt ended and that a new one does not start its command.
func TestExecHelper(t *testing.T) {
	dir := os.Getenv(execHelperDir)
	if dir == "" {
		t.Skip("run by the tests that kill it")
	}
	target.SetSupervised(os.Getenv(execHelperMode) == "supervised")
	sh := script(t, dir, "group.sh", groupScript)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"DIR=" + dir}})
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
	switch os.Getenv(execHelperDo) {
	case "signals":
		signalsHelper(t, dir)
		return
	case "escape":
		escapeHelper(t, dir)
		return
	case "hang":
		t.Fatal(e.Deliver(context.Background(), ev)) // until killed
	case "timeout":
		deadline := time.Now().Add(helperTimeout)
		tmp := filepath.Join(dir, "deadline.tmp")
		if err := os.WriteFile(tmp, []byte(strconv.FormatInt(deadline.UnixNano(), 10)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "deadline")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		err := e.Deliver(ctx, ev)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "context deadline exceeded; process group killed") {
			t.Fatalf("the attempt past its deadline: %v, want it timed out", err)
		}
		return
	}
	done := make(chan error, 1)
	go func() { done <- e.Deliver(context.Background(), ev) }()
	awaitFile(t, filepath.Join(dir, "pids"))
	target.KillRunning()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("the attempt KillRunning cut short: %v, want signal: killed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the attempt did not end after KillRunning")
	}
	after := filepath.Join(dir, "after")
	if err := os.Mkdir(after, 0o700); err != nil {
		t.Fatal(err)
	}
	e = newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"DIR=" + after}})
	err := e.Deliver(context.Background(), ev)
	if err == nil || !strings.Contains(err.Error(), "the process is exiting") {
		t.Fatalf("an attempt after KillRunning: %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(after, "pids")); err == nil {
		t.Fatal("an attempt after KillRunning ran its command")
	}
}

// startExecHelper starts TestExecHelper in mode doing do, and returns it
// once its command has written the pids of its process group's two
// processes, which it returns too.
func startExecHelper(t *testing.T, mode, do string) (helper *exec.Cmd, out *syncbuf.Buffer, exited chan error, leader, child int) {
	t.Helper()
	dir := t.TempDir()
	out = &syncbuf.Buffer{}
	helper = exec.Command(os.Args[0], "-test.run=^TestExecHelper$", "-test.count=1", "-test.v")
	helper.Env = append(os.Environ(), execHelperDir+"="+dir, execHelperMode+"="+mode, execHelperDo+"="+do)
	helper.Stdout, helper.Stderr = out, out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	t.Cleanup(func() { helper.Process.Kill() })
	pids := filepath.Join(dir, "pids")
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(pids); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				leader, _ = strconv.Atoi(f[0])
				child, _ = strconv.Atoi(f[1])
			}
			if leader <= 1 || child <= 1 {
				t.Fatalf("pids file %q", b)
			}
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the helper exited before its command started: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the helper's command did not start\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() {
		// Do not leave them behind ourselves, whatever the test found.
		syscall.Kill(leader, syscall.SIGKILL)
		syscall.Kill(child, syscall.SIGKILL)
	})
	return helper, out, exited, leader, child
}

// awaitFile waits (bounded) until path exists.
func awaitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}

// running reports whether pid runs (a zombie has exited).
func running(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && !zombie(pid)
}

// awaitEnd waits (bounded) until pid no longer runs, and fails the test
// if it still does after a minute.
func awaitEnd(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); running(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs a minute later", what, pid)
		}
	}
}

// procState is the state letter of pid in /proc ("T" when stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return s[i+2 : i+3]
}

// killHelper SIGKILLs the helper and waits for it to be gone.
func killHelper(t *testing.T, helper *exec.Cmd, exited chan error) {
	t.Helper()
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
}

// TestExecSupervisedGroupDiesWithHookbox: when the process running Exec
// is SIGKILLed (kill -9, the OOM killer) during an attempt, the supervisor
// kills the command's whole process group: the command and the background
// process it started are both gone, though they ignore SIGTERM. Before,
// both ran on, reparented to init, with no timeout, and the next hookbox
// ran their event again beside them once its lease ended.
func TestExecSupervisedGroupDiesWithHookbox(t *testing.T) {
	helper, _, exited, leader, child := startExecHelper(t, "supervised", "hang")
	killHelper(t, helper, exited)
	awaitEnd(t, leader, "the command")
	awaitEnd(t, child, "the command's background process")
}

// TestExecSupervisedTimeoutWhileHookboxStopped: when the process running
// Exec is stopped (SIGSTOP, a debugger) during an attempt, the supervisor
// kills the command's whole process group itself once the attempt's
// deadline passes, though nothing of that process runs; the attempt then
// fails as timed out. Before, the command ran on past its timeout, the
// event's lease (no longer extended) ended, and another process ran the
// event beside it, a strict source's too.
func TestExecSupervisedTimeoutWhileHookboxStopped(t *testing.T) {
	helper, out, exited, leader, child := startExecHelper(t, "supervised", "timeout")
	pid := helper.Process.Pid
	supervisor, err := syscall.Getpgid(leader)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	for end := time.Now().Add(time.Minute); procState(t, pid) != "T"; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the helper did not stop")
		}
	}
	var dir string
	for _, kv := range helper.Env {
		if v, ok := strings.CutPrefix(kv, execHelperDir+"="); ok {
			dir = v
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "deadline"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Unix(0, ns)
	if !time.Now().Before(deadline) {
		// Its own timer may then have killed the command.
		t.Fatalf("the helper stopped only %v after its attempt's deadline: too late to test anything", time.Since(deadline))
	}
	t.Logf("the helper stopped %v before its attempt's deadline", time.Until(deadline).Round(time.Millisecond))
	awaitEnd(t, leader, "the command, past its deadline while hookbox is stopped,")
	awaitEnd(t, child, "the command's background process, past its deadline while hookbox is stopped,")
	awaitEnd(t, supervisor, "the supervisor")
	if s := procState(t, pid); s != "T" {
		t.Fatalf("the helper's state is %s: it no longer stopped, so it may have killed the command itself", s)
	}
	// Let it go on: its attempt failed as timed out.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the helper did not end\n%s", out.String())
	}
}

// lateContext has a deadline that its Done ignores: it ends only later.
// An attempt under it ends at the deadline only if something other than
// Exec's own timer kills the command there.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

// TestExecSupervisorKillsAtTheDeadline: the supervisor kills the command
// at the attempt's deadline by itself, and the attempt then fails with the
// same error as when Exec kills it, as it does without a supervisor: a
// timeout, matching context.DeadlineExceeded.
func TestExecSupervisorKillsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "hang.sh", "sleep 300 &\nwait\n")
	e := newExec(t, target.ExecOptions{Argv: []string{sh}})
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}

	was := target.SetSupervised(false)
	defer target.SetSupervised(was)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	direct := e.Deliver(ctx, ev)

	target.SetSupervised(true)
	deadline := time.Now().Add(300 * time.Millisecond)
	ends, cancel := context.WithDeadline(context.Background(), deadline.Add(30*time.Second))
	defer cancel()
	late := lateContext{Context: ends, deadline: deadline}
	supervised := e.Deliver(late, ev)
	if late.Err() != nil {
		t.Fatalf("the attempt ended only when its context did, 30 s after its deadline: %v", supervised)
	}
	if fmt.Sprint(supervised) != fmt.Sprint(direct) || !errors.Is(supervised, context.DeadlineExceeded) || !errors.Is(direct, context.DeadlineExceeded) {
		t.Errorf("killed at the deadline by the supervisor: %v; by Exec, directly: %v; want the same timeout", supervised, direct)
	}
}

// TestExecDirectCommandDiesWithHookbox: without a supervisor (a program
// that embeds hookbox and did not call ExecSupervisor), the command itself
// is killed when the process running Exec is SIGKILLed (PR_SET_PDEATHSIG).
// Before, it ran on. The background processes it started are not killed:
// that is what the supervisor is for (see ExecSupervisor's doc).
func TestExecDirectCommandDiesWithHookbox(t *testing.T) {
	helper, _, exited, leader, _ := startExecHelper(t, "direct", "hang")
	killHelper(t, helper, exited)
	awaitEnd(t, leader, "the command")
}

// TestKillRunningKillsGroups: KillRunning, which hookbox calls before it
// exits at a second signal, kills the process group of every running
// command, with or without a supervisor, and no command starts after it.
// Before, exiting at a second signal left the commands running.
func TestKillRunningKillsGroups(t *testing.T) {
	for _, mode := range []string{"supervised", "direct"} {
		t.Run(mode, func(t *testing.T) {
			_, out, exited, leader, child := startExecHelper(t, mode, "killrunning")
			awaitEnd(t, leader, "the command")
			awaitEnd(t, child, "the command's background process")
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("helper: %v\n%s", err, out.String())
				}
			case <-time.After(time.Minute):
				t.Fatalf("the helper did not end\n%s", out.String())
			}
		})
	}
}

// TestExecSignalledCommand: a command killed by a signal fails its
// attempt with the signal's name, the same whether or not it runs under a
// supervisor (which reports how it ended rather than ending that way
// itself).
func TestExecSignalledCommand(t *testing.T) { eachMode(t, testExecSignalledCommand) }

func testExecSignalledCommand(t *testing.T) {
	dir := t.TempDir()
	for sig, want := range map[string]string{"KILL": "signal: killed", "SEGV": "signal: segmentation fault", "TERM": "signal: terminated"} {
		sh := script(t, dir, sig+".sh", "ulimit -c 0\necho dying\nkill -"+sig+" $$\n")
		e := newExec(t, target.ExecOptions{Argv: []string{sh}})
		err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		if w := "exec: " + sig + ".sh: " + want + "; output: dying"; err == nil || err.Error() != w {
			t.Errorf("SIG%s: %v, want %s", sig, err, w)
		}
	}
}

// TestExecGroupSignalsLeaveSupervisorAwake: a signal sent to the
// command's process group reaches the supervisor too, which leads it. A
// command's kill -ABRT 0 ended the supervisor (Go's default for SIGABRT),
// and Exec took its exit for a want of processes: the attempt was given
// back, never charged, and the event retried forever; run directly it
// fails "signal: aborted". A SIGTTOU (the kernel's, to a background group
// that touches the terminal) stopped the supervisor: its deadline could
// not fire, and a process the command had started out of its group
// outlived the attempt. The supervisor now catches both, and every other
// signal that ends or stops a Go program, and leaves them to the command
// (found by a helper's review, session 44).
func TestExecGroupSignalsLeaveSupervisorAwake(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		dir := t.TempDir()
		sh := script(t, dir, "abort.sh", "ulimit -c 0\necho aborting\nkill -ABRT 0\nsleep 1\nexit 1\n")
		e := newExec(t, target.ExecOptions{Argv: []string{sh}})
		err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		if w := "exec: abort.sh: signal: aborted; output: aborting"; err == nil || err.Error() != w {
			t.Errorf("kill -ABRT 0: %.300v, want %s", err, w)
		}
	})
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	was := target.SetSupervised(true)
	t.Cleanup(func() { target.SetSupervised(was) })
	mark := fmt.Sprintf("300.%d79", os.Getpid())
	t.Cleanup(func() {
		for _, pid := range processesWithArg(t, mark) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sh := script(t, t.TempDir(), "ttou.sh", `setsid sleep "$MARK" </dev/null >/dev/null 2>&1 &
sleep 0.2
kill -TTOU 0
exit 0
`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"MARK=" + mark}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := e.Deliver(ctx, &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}); err == nil {
		t.Error("a command stopped by SIGTTOU succeeded")
	}
	var left []int
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left = processesWithArg(t, mark); len(left) == 0 || time.Now().After(end) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("3 s after the attempt ended, the process the command started out of its group still runs: %v", left)
	}
}

// BenchmarkExecAttempt measures an attempt of /bin/true, run under a
// supervisor (this test binary started again) and directly: the
// difference is what the supervisor costs per attempt.
func BenchmarkExecAttempt(b *testing.B) {
	for _, supervised := range []bool{true, false} {
		name := "direct"
		if supervised {
			name = "supervised"
		}
		b.Run(name, func(b *testing.B) {
			was := target.SetSupervised(supervised)
			defer target.SetSupervised(was)
			e, err := target.NewExec(target.ExecOptions{Argv: []string{"/bin/true"}})
			if err != nil {
				b.Fatal(err)
			}
			ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
			for b.Loop() {
				if err := e.Deliver(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExecSupervisedErrorsAsDirect: an attempt fails with the same error
// under a supervisor as without one, whether its command is missing, its
// directory is, it is not executable, it exits non-zero or is killed by a
// signal; and one that succeeds succeeds in both.
func TestExecSupervisedErrorsAsDirect(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec.sh")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]target.ExecOptions{
		"missing command":  {Argv: []string{"/nonexistent/hookbox-handler", "--token", "argv-secret"}},
		"missing in PATH":  {Argv: []string{"hookbox-handler-not-in-path"}},
		"missing dir":      {Argv: []string{"/bin/cat"}, Dir: filepath.Join(dir, "gone")},
		"not executable":   {Argv: []string{noexec}},
		"relative in dir":  {Argv: []string{"./noexec.sh"}, Dir: dir},
		"exit code":        {Argv: []string{script(t, dir, "exit.sh", "echo out; echo err >&2; exit 3\n")}},
		"signal":           {Argv: []string{script(t, dir, "sig.sh", "kill -9 $$\n")}},
		"success":          {Argv: []string{script(t, dir, "ok.sh", "cat >/dev/null\n")}},
		"stdin not read":   {Argv: []string{script(t, dir, "noread.sh", "exec 0<&-; exit 4\n")}},
		"output then fail": {Argv: []string{script(t, dir, "loud.sh", "seq 1 20000; exit 1\n")}, OutputLimit: 50},
	}
	big := bytes.Repeat([]byte("x"), 1<<20) // more than a pipe holds
	for name, opts := range cases {
		errs := map[bool]error{}
		for _, sup := range []bool{true, false} {
			was := target.SetSupervised(sup)
			e := newExec(t, opts)
			errs[sup] = e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: big})
			target.SetSupervised(was)
		}
		s, d := errs[true], errs[false]
		if fmt.Sprint(s) != fmt.Sprint(d) || errors.Is(s, fs.ErrNotExist) != errors.Is(d, fs.ErrNotExist) ||
			errors.Is(s, fs.ErrPermission) != errors.Is(d, fs.ErrPermission) {
			t.Errorf("%s: supervised %v, direct %v", name, s, d)
		}
	}
}

// signalsHelper runs a command that prints the signals it ignores and
// blocks, under a supervisor and directly, and fails if they differ.
func signalsHelper(t *testing.T, dir string) {
	sh := script(t, dir, "signals.sh", "grep -E '^Sig(Ign|Blk):' /proc/self/status\nexit 1\n")
	e := newExec(t, target.ExecOptions{Argv: []string{sh}})
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
	got := map[bool]string{}
	for _, sup := range []bool{true, false} {
		target.SetSupervised(sup)
		got[sup] = fmt.Sprint(e.Deliver(context.Background(), ev))
	}
	if got[true] != got[false] {
		t.Fatalf("signals ignored and blocked by the command\nsupervised: %s\ndirect:     %s", got[true], got[false])
	}
	t.Logf("%s", got[true])
}

// TestExecSupervisedKeepsSignalDispositions: a command run under a
// supervisor ignores and blocks the same signals as one run directly, also
// when hookbox was started with SIGHUP and SIGINT ignored (nohup, a
// background job of a script): a signal the supervisor catches would
// otherwise reach the command with its default action.
func TestExecSupervisedKeepsSignalDispositions(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command("/bin/sh", "-c", `trap '' HUP INT; exec "$0" -test.run='^TestExecHelper$' -test.count=1 -test.v`, os.Args[0])
	helper.Env = append(os.Environ(), execHelperDir+"="+dir, execHelperMode+"=supervised", execHelperDo+"=signals")
	out, err := helper.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestExecHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

// TestExecKillsWhatLeftTheGroup: a process the command starts that leaves
// its process group (setsid, as start-stop-daemon --background and daemon
// libraries do), and the process that one starts in turn, are killed with
// the command under a supervisor (a child subreaper): when the command
// exits, when the attempt's context is cancelled (a shutdown), and when
// the supervisor kills the command at the deadline, and when KillRunning
// (a second signal to hookbox) kills it. Before, only the
// group was killed: the escaped processes ran on after the attempt
// (found here by a marker in their arguments), and one still doing the
// event's work would run beside its retry.
func TestExecKillsWhatLeftTheGroup(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	was := target.SetSupervised(true)
	t.Cleanup(func() { target.SetSupervised(was) })
	for i, end := range []string{"exits", "cancelled", "deadline", "killrunning"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			// A sleep of 300 s and a fraction no other process uses.
			mark := fmt.Sprintf("300.%d%d", os.Getpid(), i)
			t.Cleanup(func() {
				for _, pid := range processesWithArg(t, mark) {
					syscall.Kill(pid, syscall.SIGKILL) // do not leave them behind ourselves
				}
			})
			if end == "killrunning" {
				// KillRunning ends the process that calls it for good:
				// the helper calls it.
				helper := exec.Command(os.Args[0], "-test.run=^TestExecHelper$", "-test.count=1", "-test.v")
				helper.Env = append(os.Environ(), execHelperDir+"="+dir, execHelperMode+"=supervised", execHelperDo+"=escape", execHelperMark+"="+mark)
				if out, err := helper.CombinedOutput(); err != nil {
					t.Fatalf("helper: %v\n%s", err, out)
				}
				return
			}
			sh := script(t, dir, "escape.sh", escapeScript)
			e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"DIR=" + dir, "MARK=" + mark, "END=" + end}})
			ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)}
			var err error
			switch end {
			case "exits":
				err = e.Deliver(context.Background(), ev)
			case "cancelled":
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					defer cancel()
					// Until the command has escaped, or ended: at most
					// its attempt.
					for ctx.Err() == nil {
						if _, err := os.Stat(filepath.Join(dir, "escaped.pid")); err == nil {
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
				}()
				err = e.Deliver(ctx, ev)
				cancel()
			case "deadline":
				// The supervisor's own timer ends it: the context ends
				// much later (see lateContext).
				deadline := time.Now().Add(5 * time.Second)
				ends, cancel := context.WithDeadline(context.Background(), deadline.Add(30*time.Second))
				err = e.Deliver(lateContext{Context: ends, deadline: deadline}, ev)
				cancel()
			}
			escaped := readPID(t, filepath.Join(dir, "escaped.pid"))
			if want := map[string]error{"cancelled": context.Canceled, "deadline": context.DeadlineExceeded}[end]; !errors.Is(err, want) {
				t.Errorf("the attempt: %v, want %v", err, want)
			}
			if pids := processesWithArg(t, mark); len(pids) > 0 {
				t.Errorf("after the attempt, the process that left the group (pid %d) left %v running with argument %s", escaped, pids, mark)
			}
		})
	}
}

// escapeScript starts a process that leaves its process group (setsid)
// and starts a sleep of $MARK seconds, writes the sleep's pid to
// $DIR/escaped.pid, and then exits, or, unless $END is "exits", sleeps.
// The pid file appears whole (written aside, then renamed): the
// "cancelled" case ends the command as soon as the file exists, and a
// file the shell had created but not yet written was read empty ("pid
// file" failures under load).
// $MARK is an argument of each process that leaves the group from the
// start (the sleep's, before it runs sleep, is a copy of its parent's).
const escapeScript = `mkfifo "$DIR/ready"
setsid sh -c 'sleep "$1" & echo $! > "$DIR/ready"; wait' escaped "$MARK" &
read pid < "$DIR/ready"
echo "$pid" > "$DIR/escaped.tmp"
mv "$DIR/escaped.tmp" "$DIR/escaped.pid"
if [ "$END" != exits ]; then exec sleep 300; fi
`

// execHelperMark is the argument of escapeScript's sleep in the helper's
// "escape" mode.
const execHelperMark = "HOOKBOX_TEST_EXEC_HELPER_MARK"

// escapeHelper runs escapeScript, calls KillRunning once its sleep has
// left the command's group, and checks that the sleep is gone as soon
// as KillRunning returns, and that the attempt failed as killed.
func escapeHelper(t *testing.T, dir string) {
	mark := os.Getenv(execHelperMark)
	sh := script(t, dir, "escape.sh", escapeScript)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"DIR=" + dir, "MARK=" + mark, "END=hang"}})
	done := make(chan error, 1)
	go func() {
		done <- e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	awaitFile(t, filepath.Join(dir, "escaped.pid"))
	target.KillRunning()
	if pids := processesWithArg(t, mark); len(pids) > 0 {
		t.Errorf("KillRunning returned, and the process that left the group still runs: %v", pids)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("the attempt KillRunning cut short: %v, want signal: killed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the attempt did not end after KillRunning")
	}
}

// processesWithArg returns the pids of the processes that have arg among
// their arguments, as /proc/PID/cmdline shows them.
func processesWithArg(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // gone meanwhile
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg && !zombie(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
