//go:build unix

package target_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// eachMode runs test twice: with commands run under a supervisor, as
// hookbox's binary runs them on Linux (target.ExecSupervisor), and run
// directly, as in a program that embeds hookbox. An attempt must behave
// the same either way.
func eachMode(t *testing.T, test func(t *testing.T)) {
	for _, supervised := range []bool{true, false} {
		name := "direct"
		if supervised {
			name = "supervised"
		}
		t.Run(name, func(t *testing.T) {
			if supervised && !target.CanSupervise {
				t.Skip("no supervisor on " + runtime.GOOS)
			}
			was := target.SetSupervised(supervised)
			t.Cleanup(func() { target.SetSupervised(was) })
			test(t)
		})
	}
}

// script writes an executable sh script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func newExec(t *testing.T, opts target.ExecOptions) *target.Exec {
	t.Helper()
	e, err := target.NewExec(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExecDone: exit 0 is done; the command read the exact payload on
// stdin and saw the event's fields and the extra env.
func TestExecDone(t *testing.T) { eachMode(t, testExecDone) }

func testExecDone(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "hook.sh", `cat > "$OUT/stdin.$HOOKBOX_EVENT_ID"
env > "$OUT/env.$HOOKBOX_EVENT_ID"
`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"OUT=" + dir}})
	rg := newRig(t, map[string]worker.Target{"gh": e}, quick)
	// Binary, NULs, no trailing newline, larger than a pipe buffer.
	payload := append([]byte("{\"a\":\"\x00\xff\"}\n\t"), bytes.Repeat([]byte("0123456789abcdef"), 8192)...)
	ids := rg.ingest(hookbox.Delivery{Source: "gh", DeliveryID: "72d3162e-cc78", EventType: "push", Payload: payload})
	rg.want(ids[0], hookbox.StatusDone, 1)

	id := strconv.FormatInt(ids[0], 10)
	got, err := os.ReadFile(filepath.Join(dir, "stdin."+id))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("stdin: %d bytes, want the %d payload bytes exactly", len(got), len(payload))
	}
	envText, err := os.ReadFile(filepath.Join(dir, "env."+id))
	if err != nil {
		t.Fatal(err)
	}
	env := parseEnv(string(envText))
	for k, v := range map[string]string{
		"HOOKBOX_SOURCE":          "gh",
		"HOOKBOX_DELIVERY_ID":     "72d3162e-cc78",
		"HOOKBOX_EVENT_ID":        id,
		"HOOKBOX_EVENT_TYPE":      "push",
		"HOOKBOX_ATTEMPT":         "1",
		"HOOKBOX_IDEMPOTENCY_KEY": "gh:72d3162e-cc78",
		"OUT":                     dir,
	} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
}

// parseEnv reads the output of env(1).
func parseEnv(text string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// execEnv runs env(1) through an Exec made from opts and returns what it
// printed.
func execEnv(t *testing.T, opts target.ExecOptions) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	sh := script(t, dir, "env.sh", "exec env > "+out+"\n")
	opts.Argv = []string{sh}
	e := newExec(t, opts)
	ev := &hookbox.Event{ID: 7, Source: "s", DeliveryID: "d", EventType: "push", Attempts: 1, Payload: []byte(`{}`)}
	if err := e.Deliver(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := parseEnv(string(b))
	for _, k := range []string{"PWD", "SHLVL", "_"} {
		delete(env, k) // sh sets these itself
	}
	return env
}

// TestExecMinimalEnvironment: by default the command sees PATH, HOME, the
// configured extras and the event's HOOKBOX_* fields, and nothing else of
// hookbox's environment: not the secrets a config expands from it, nor
// hookbox's own HOOKBOX_* settings.
func TestExecMinimalEnvironment(t *testing.T) { eachMode(t, testExecMinimalEnvironment) }

func testExecMinimalEnvironment(t *testing.T) {
	t.Setenv("HOOKBOX_ADMIN_TOKEN", "adm-secret-token-1")
	t.Setenv("POLAR_WEBHOOK_SECRET", "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=")
	t.Setenv("HOOKBOX_DB", "postgres://u:pw@db/hookbox")
	t.Setenv("HOME", "/home/hookbox")
	env := execEnv(t, target.ExecOptions{Env: []string{"DEPLOY_DIR=/srv"}})
	want := map[string]string{
		"PATH":                    os.Getenv("PATH"),
		"HOME":                    "/home/hookbox",
		"DEPLOY_DIR":              "/srv",
		"HOOKBOX_SOURCE":          "s",
		"HOOKBOX_DELIVERY_ID":     "d",
		"HOOKBOX_EVENT_ID":        "7",
		"HOOKBOX_EVENT_TYPE":      "push",
		"HOOKBOX_ATTEMPT":         "1",
		"HOOKBOX_IDEMPOTENCY_KEY": "s:d",
	}
	for k, v := range env {
		if want[k] != v {
			t.Errorf("env %s=%q, want it absent or %q", k, v, want[k])
		}
	}
	for k := range want {
		if _, ok := env[k]; !ok {
			t.Errorf("env lacks %s", k)
		}
	}
}

// TestExecMinimalEnvironmentDefaults: without PATH or HOME in hookbox's
// environment the command still gets a usable PATH, and no HOME.
func TestExecMinimalEnvironmentDefaults(t *testing.T) {
	eachMode(t, testExecMinimalEnvironmentDefaults)
}

func testExecMinimalEnvironmentDefaults(t *testing.T) {
	t.Setenv("HOME", "") // restored when the test ends
	os.Unsetenv("HOME")
	t.Setenv("PATH", "")
	os.Unsetenv("PATH")
	env := execEnv(t, target.ExecOptions{})
	if env["PATH"] == "" {
		t.Error("no PATH")
	}
	if v, ok := env["HOME"]; ok {
		t.Errorf("HOME=%q, want none", v)
	}
}

// TestExecInheritEnv: with InheritEnv the command gets hookbox's whole
// environment, the extras and the event's fields, later ones winning.
func TestExecInheritEnv(t *testing.T) { eachMode(t, testExecInheritEnv) }

func testExecInheritEnv(t *testing.T) {
	t.Setenv("HOOKBOX_TEST_PARENT_VAR", "from-parent")
	t.Setenv("HOOKBOX_SOURCE", "stale")
	env := execEnv(t, target.ExecOptions{InheritEnv: true, Env: []string{"X=1"}})
	if env["HOOKBOX_TEST_PARENT_VAR"] != "from-parent" || env["X"] != "1" || env["HOOKBOX_SOURCE"] != "s" {
		t.Errorf("env = %v", env)
	}
}

// TestExecOutputRedacted: a command that prints the environment it was
// given, a secret and its encodings, leaves none of them in the error.
func TestExecOutputRedacted(t *testing.T) { eachMode(t, testExecOutputRedacted) }

func testExecOutputRedacted(t *testing.T) {
	const token = "adm-secret-token-1"
	const whsec = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	dir := t.TempDir()
	sh := script(t, dir, "leak.sh", `env
echo "token=$TOKEN"
printf %s "$TOKEN" | base64
echo "key=${SECRET#whsec_}"
exit 1
`)
	r := redact.New(token, whsec)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"TOKEN=" + token, "SECRET=" + whsec}, Redactor: r})
	err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, leak := range []string{token, "c2VjcmV0LXNlY3JldC1zZWNyZXQ", "YWRtLXNlY3JldC10b2tlbi0x"} {
		if strings.Contains(msg, leak) {
			t.Errorf("error holds %q: %s", leak, msg)
		}
	}
	if !strings.Contains(msg, "token="+redact.Mask) || !strings.Contains(msg, "key="+redact.Mask) {
		t.Errorf("error %q", msg)
	}
}

// TestExecArgumentsRedacted: an Exec masks the credentials written in its
// own arguments (redact.ArgSecrets) in the output its errors show, with
// or without a Redactor, as a Forward masks its URL's:
// a program that embeds hookbox and builds an Exec gets the same masking
// as hookbox serve. The rest of the command line stays readable.
func TestExecArgumentsRedacted(t *testing.T) { eachMode(t, testExecArgumentsRedacted) }

func testExecArgumentsRedacted(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "args.sh", `echo "argv: $*"; exit 1`)
	argv := []string{sh, "-u", "deploy:arg-password-1", "--token=arg-token-123", "postgres://app:arg-pg-pass@db/app", "--env", "production"}
	for _, r := range []*redact.Redactor{nil, redact.New("another-secret-1")} {
		e := newExec(t, target.ExecOptions{Argv: argv, Redactor: r})
		err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil {
			t.Fatal("want an error")
		}
		msg := err.Error()
		for _, leak := range []string{"arg-password-1", "arg-token-123", "arg-pg-pass"} {
			if strings.Contains(msg, leak) {
				t.Errorf("error holds %q: %s", leak, msg)
			}
		}
		if want := "argv: -u deploy:[REDACTED] --token=[REDACTED] postgres://app:[REDACTED]@db/app --env production"; !strings.Contains(msg, want) {
			t.Errorf("error %q, want it to hold %q", msg, want)
		}
	}
}

// TestExecOutputTailRedacted: the cut that keeps the output's tail never
// leaves part of a secret showing.
func TestExecOutputTailRedacted(t *testing.T) { eachMode(t, testExecOutputTailRedacted) }

func testExecOutputTailRedacted(t *testing.T) {
	const token = "adm-secret-token-1"
	r := redact.New(token)
	dir := t.TempDir()
	sh := script(t, dir, "tail.sh", `printf "%s%s" "$PAD" "$TOKEN"; exit 1`)
	for pad := 0; pad < 30; pad++ {
		e := newExec(t, target.ExecOptions{Argv: []string{sh}, OutputLimit: 20, Redactor: r,
			Env: []string{"TOKEN=" + token, "PAD=" + strings.Repeat("x", pad)}})
		err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
		msg := err.Error()
		for k := 3; k <= len(token); k++ {
			if frag := token[len(token)-k:]; strings.Contains(msg, frag) {
				t.Fatalf("pad %d: error %q shows %q", pad, msg, frag)
			}
		}
	}
}

// TestExecFailureRetried: a non-zero exit is retried, and the error gives
// the exit code and the combined stdout and stderr.
func TestExecFailureRetried(t *testing.T) { eachMode(t, testExecFailureRetried) }

func testExecFailureRetried(t *testing.T) {
	dir := t.TempDir()
	flaky := script(t, dir, "flaky.sh", `if [ "$HOOKBOX_ATTEMPT" -lt 2 ]; then
  echo "to stdout"
  echo "to stderr" >&2
  exit 3
fi
exit 0
`)
	broken := script(t, dir, "broken.sh", `echo "cannot deploy $HOOKBOX_DELIVERY_ID" >&2; exit 3`)
	pol := quick
	pol.MaxAttempts = 3
	rg := newRig(t, map[string]worker.Target{
		"flaky":  newExec(t, target.ExecOptions{Argv: []string{flaky}}),
		"broken": newExec(t, target.ExecOptions{Argv: []string{broken}}),
	}, pol)
	ids := rg.ingest(
		hookbox.Delivery{Source: "flaky", DeliveryID: "f1", Payload: []byte(`{}`)},
		hookbox.Delivery{Source: "broken", DeliveryID: "b1", Payload: []byte(`{}`)},
	)
	rg.want(ids[0], hookbox.StatusDone, 2)
	as := rg.attempts(ids[0])
	if len(as) != 2 || as[0].Outcome != hookbox.AttemptRetry {
		t.Fatalf("flaky attempts: %+v", as)
	}
	if want := "exec: flaky.sh: exit code 3; output: to stdout\nto stderr"; as[0].Error != want {
		t.Errorf("first attempt error %q, want %q", as[0].Error, want)
	}
	e := rg.want(ids[1], hookbox.StatusDead, 3)
	if want := "exec: broken.sh: exit code 3; output: cannot deploy b1"; e.LastError != want {
		t.Errorf("last error %q, want %q", e.LastError, want)
	}
}

// TestExecOutputTail: only the last OutputLimit bytes of output are kept.
func TestExecOutputTail(t *testing.T) { eachMode(t, testExecOutputTail) }

func testExecOutputTail(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "loud.sh", `i=0
while [ $i -lt 2000 ]; do echo "line $i of noise"; i=$((i+1)); done
echo "THE REAL REASON" >&2
exit 1
`)
	e := newExec(t, target.ExecOptions{Argv: []string{"./loud.sh"}, Dir: dir, OutputLimit: 100})
	err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "exec: loud.sh: exit code 1; output: …") || !strings.HasSuffix(msg, "line 1999 of noise\nTHE REAL REASON") {
		t.Errorf("error %q", msg)
	}
	if out := msg[strings.Index(msg, "…")+len("…"):]; len(out) > 100 {
		t.Errorf("kept %d bytes of output, want at most 100", len(out))
	}
}

// TestExecTimeoutKillsGroup: when the attempt times out, the command and
// the background process it started are both killed: no orphan is left.
func TestExecTimeoutKillsGroup(t *testing.T) { eachMode(t, testExecTimeoutKillsGroup) }

func testExecTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "grandchild.pid")
	sh := script(t, dir, "hang.sh", `sleep 300 &
echo $! > "$PIDFILE"
wait
`)
	pol := quick
	pol.MaxAttempts = 1
	// Long enough for the script to start (under a supervisor too) and
	// write its pid file on a loaded machine.
	pol.Timeout = 2 * time.Second
	rg := newRig(t, map[string]worker.Target{
		"hang": newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"PIDFILE=" + pidfile}}),
	}, pol)
	start := time.Now()
	ids := rg.ingest(hookbox.Delivery{Source: "hang", DeliveryID: "h1", Payload: []byte(`{}`)})
	e := rg.want(ids[0], hookbox.StatusDead, 1)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the timed-out attempt took %v to finish", took)
	}
	if !strings.Contains(e.LastError, "deadline exceeded; process group killed") {
		t.Errorf("last error %q", e.LastError)
	}
	waitGone(t, readPID(t, pidfile))
}

// TestExecExitKillsLeftovers: a command that exits 0 but leaves a
// background process holding its output finishes promptly, and the
// leftover is killed with its group. Not timed: Exec's wait on the output
// (execWaitDelay) is made longer than the leftover lives, so an Exec that
// waits on the leftover's output before killing it does not return while
// the leftover runs, and the test says so instead of timing a wait of 2 s.
func TestExecExitKillsLeftovers(t *testing.T) { eachMode(t, testExecExitKillsLeftovers) }

func testExecExitKillsLeftovers(t *testing.T) {
	was := target.SetExecWaitDelay(time.Hour)
	t.Cleanup(func() { target.SetExecWaitDelay(was) })
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "leftover.pid")
	sh := script(t, dir, "leave.sh", `sleep 300 &
echo $! > "$PIDFILE"
echo started
exit 0
`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"PIDFILE=" + pidfile}})
	done := make(chan error, 1)
	go func() {
		done <- e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		// Its leftover sleeps 300 s: Deliver waits on its output.
		syscall.Kill(readPID(t, pidfile), syscall.SIGKILL)
		<-done
		t.Fatal("Deliver still waiting 30 s after the command exited: it waits on the leftover's output")
	}
	waitGone(t, readPID(t, pidfile))
}

// TestExecCancelled: cancelling the context (a shutdown) ends the attempt
// at once with an error that matches context.Canceled. Not timed: the
// command sleeps 300 s and Exec's wait for a killed command and its output
// (execWaitDelay) is made an hour, so an attempt that does not end at the
// cancel does not end while the test runs, and the test says so.
func TestExecCancelled(t *testing.T) { eachMode(t, testExecCancelled) }

func testExecCancelled(t *testing.T) {
	was := target.SetExecWaitDelay(time.Hour)
	t.Cleanup(func() { target.SetExecWaitDelay(was) })
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "slow.pid")
	sh := script(t, dir, "slow.sh", `echo $$ > "$PIDFILE"
exec sleep 300
`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"PIDFILE=" + pidfile}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- e.Deliver(ctx, &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	// Cancelled once the command runs.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(pidfile); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start within 20 s")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(readPID(t, pidfile), syscall.SIGKILL)
		<-done
		t.Fatal("the attempt still runs 30 s after its context was cancelled")
	}
	waitGone(t, readPID(t, pidfile))
}

// TestExecStartFailure: a missing command is an error to retry (it may be
// deployed later), naming the command.
func TestExecStartFailure(t *testing.T) { eachMode(t, testExecStartFailure) }

func testExecStartFailure(t *testing.T) {
	e := newExec(t, target.ExecOptions{Argv: []string{"/nonexistent/hookbox-handler", "--token", "argv-secret"}})
	err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) || !strings.Contains(err.Error(), "hookbox-handler") {
		t.Errorf("err = %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "argv-secret") {
		t.Errorf("error quotes the arguments: %v", err)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %q", b)
	}
	return pid
}

// waitGone waits (bounded) until pid no longer runs. A zombie counts as
// gone: it has exited and only waits for init to reap it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL) // do not leave it behind ourselves
			t.Fatalf("process %d still runs 5s after the attempt ended (Kill(pid, 0) = %v): orphan left", pid, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie reports whether /proc says pid has exited but is not reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestExecOutputLoggedAtDebug: the output of a successful attempt is
// logged at debug level, with secrets masked, and not at all at info.
func TestExecOutputLoggedAtDebug(t *testing.T) { eachMode(t, testExecOutputLoggedAtDebug) }

func testExecOutputLoggedAtDebug(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "talk.sh", `echo "deployed $HOOKBOX_DELIVERY_ID with secret-token-12345"`)
	r := redact.New("secret-token-12345")
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		e := newExec(t, target.ExecOptions{Argv: []string{sh}, Redactor: r, Logger: log})
		ev := &hookbox.Event{ID: 7, Source: "gh", DeliveryID: "d-42", Attempts: 1, Payload: []byte(`{}`)}
		if err := e.Deliver(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		got := buf.String()
		if level == slog.LevelInfo {
			if got != "" {
				t.Errorf("logged at info level: %s", got)
			}
			continue
		}
		for _, want := range []string{"level=DEBUG", `msg="exec output"`, "command=talk.sh", "source=gh", "event_id=7", "attempt=1",
			`output="deployed d-42 with ` + redact.Mask + `"`} {
			if !strings.Contains(got, want) {
				t.Errorf("debug log lacks %s:\n%s", want, got)
			}
		}
		if strings.Contains(got, "secret-token-12345") {
			t.Errorf("log shows the secret: %s", got)
		}
	}
}

// TestExecMissingDir: when the working directory is missing, the error
// says so, rather than only os/exec's "no such file or directory" that
// reads as if the command were missing; it is retried, since the
// directory may be created.
func TestExecMissingDir(t *testing.T) { eachMode(t, testExecMissingDir) }

func testExecMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	e := newExec(t, target.ExecOptions{Argv: []string{"/bin/cat"}, Dir: dir})
	err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) || !strings.Contains(err.Error(), "working directory "+dir+" (exec_dir) does not exist") {
		t.Errorf("err = %v", err)
	}
}

// TestExecPermanentExitCodes: an exit code listed in PermanentExitCodes
// is the command's refusal of its event for good, a worker.Permanent
// error that says so; any other exit code is retried, and so is a
// command killed by a signal, even when the shell would report that
// signal as an exit code that is listed (128+9).
func TestExecPermanentExitCodes(t *testing.T) { eachMode(t, testExecPermanentExitCodes) }

func testExecPermanentExitCodes(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "judge.sh", `echo "judging $HOOKBOX_DELIVERY_ID"
case "$HOOKBOX_DELIVERY_ID" in
bad) exit 65 ;;
killed) kill -KILL $$ ;;
esac
exit 3
`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh}, PermanentExitCodes: []int{65, 137}})
	for _, c := range []struct {
		id, text  string
		permanent bool
	}{
		{"bad", "exec: judge.sh: exit code 65 (in permanent_exit_codes: not retried); output: judging bad", true},
		{"other", "exec: judge.sh: exit code 3; output: judging other", false},
		{"killed", "exec: judge.sh: signal: killed; output: judging killed", false},
	} {
		err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: c.id, Attempts: 1, Payload: []byte(`{}`)})
		if err == nil || err.Error() != c.text || worker.IsPermanent(err) != c.permanent {
			t.Errorf("%s: err = %v (permanent %v), want %q (permanent %v)", c.id, err, worker.IsPermanent(err), c.text, c.permanent)
		}
	}
}

// TestExecStoredErrorIsTheOutputsEnd: the stored error of a failed
// attempt holds the end of the command's output in one piece, as much of
// it as worker.MaxErrorText leaves room for, cut only at its front
// (marked "…"). It held a piece from 64 KiB before the end, " … ", and
// the last kilobyte, which read as consecutive output.
func TestExecStoredErrorIsTheOutputsEnd(t *testing.T) {
	eachMode(t, testExecStoredErrorIsTheOutputsEnd)
}

func testExecStoredErrorIsTheOutputsEnd(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "lines.sh", `i=1
while [ $i -le 20000 ]; do echo "line $i"; i=$((i+1)); done
exit 1
`)
	pol := quick
	pol.MaxAttempts = 1
	rg := newRig(t, map[string]worker.Target{"lines": newExec(t, target.ExecOptions{Argv: []string{sh}})}, pol)
	ids := rg.ingest(hookbox.Delivery{Source: "lines", DeliveryID: "l1", Payload: []byte(`{}`)})
	stored := rg.want(ids[0], hookbox.StatusDead, 1).LastError
	const head = "exec: lines.sh: exit code 1; output: …"
	if !strings.HasPrefix(stored, head) || len(stored) > worker.MaxErrorText {
		t.Fatalf("stored error of %d bytes: %q, want %q and the output's end, at most %d bytes", len(stored), stored, head, worker.MaxErrorText)
	}
	out := stored[len(head):]
	if len(out) < worker.MaxErrorText-len(head)-64 {
		t.Errorf("the stored error holds %d bytes of output, want about %d", len(out), worker.MaxErrorText-len(head))
	}
	// The first line may be cut; every whole one follows the one before,
	// up to the last.
	lines := strings.Split(out, "\n")[1:]
	for i, line := range lines {
		if want := fmt.Sprintf("line %d", 20000-len(lines)+1+i); line != want {
			t.Fatalf("stored output line %d of %d is %q, want %q: not the output's end in one piece:\n%s", i+1, len(lines), line, want, stored)
		}
	}
}

// TestExecErrorShowsKeyFilePath: an exec target given a key file's path
// ("--key /etc/…/client.key") shows that path in the output its errors
// quote, where the command says it could not read the file, while the
// credential given to --token beside it stays masked.
func TestExecErrorShowsKeyFilePath(t *testing.T) { eachMode(t, testExecErrorShowsKeyFilePath) }

func testExecErrorShowsKeyFilePath(t *testing.T) {
	dir := t.TempDir()
	sh := script(t, dir, "key.sh", `echo "could not load PEM client certificate from $2"; exit 58`)
	e := newExec(t, target.ExecOptions{Argv: []string{sh, "--key", "/etc/hookbox/tls/client.key", "--token", "exec-token-5678"}})
	err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("want an error")
	}
	if msg := err.Error(); !strings.Contains(msg, "could not load PEM client certificate from /etc/hookbox/tls/client.key") {
		t.Errorf("error %q hides the key file's path", msg)
	}
	e = newExec(t, target.ExecOptions{Argv: []string{sh, "--token", "exec-token-5678"}})
	err = e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if msg := err.Error(); strings.Contains(msg, "exec-token-5678") || !strings.Contains(msg, redact.Mask) {
		t.Errorf("error %q shows the token", msg)
	}
}
