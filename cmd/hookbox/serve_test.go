package main

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestServeLogsStartWarnings: serve logs the config's start-time warnings
// at WARN before anything else, here the example secret of a source whose
// variable is unset. The context is already cancelled, so serve stops as
// soon as it has started.
func TestServeLogsStartWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.yaml")
	doc := "sources:\n  - name: gh\n    scheme: github\n    secrets: ['${HB_SERVE_TEST_UNSET:-example-secret-value}']\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"serve", "--config", path, "--db", "sqlite:" + filepath.Join(dir, "hookbox.db"), "--listen", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = root.ExecuteContext(ctx)
	log := errOut.String()
	var warning string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "HB_SERVE_TEST_UNSET") {
			warning = line
		}
	}
	if warning == "" || !strings.Contains(warning, "gh") {
		t.Fatalf("no WARN line naming source gh and HB_SERVE_TEST_UNSET in the log:\n%s", log)
	}
	if strings.Contains(log, "example-secret-value") {
		t.Fatalf("the log shows the secret:\n%s", log)
	}
}

// startedLog is the log writer of serveLog: it cancels serve once the
// start line is written.
type startedLog struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (l *startedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if strings.Contains(l.buf.String(), "msg=listening") {
		l.cancel()
	}
	return len(p), nil
}

func (l *startedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// serveLog runs serve on doc with a database of its own (unless extra
// names one) on port 0, stops it once it has logged its start line, and
// returns what it logged.
func serveLog(t *testing.T, doc string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &startedLog{cancel: cancel}
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(log)
	args := []string{"serve", "--config", path, "--db", "sqlite:" + filepath.Join(dir, "hookbox.db"), "--listen", "127.0.0.1:0"}
	root.SetArgs(append(args, extra...))
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("serve: %v\n%s", err, log)
	}
	return log.String()
}

// logLine returns the first line of log holding every one of want.
func logLine(log string, want ...string) string {
	for _, line := range strings.Split(log, "\n") {
		found := true
		for _, w := range want {
			found = found && strings.Contains(line, w)
		}
		if found {
			return line
		}
	}
	return ""
}

// TestServeWarnsSourceWithoutTarget: serve warns at start about a source
// with neither forward nor exec, and not about one that says store_only.
func TestServeWarnsSourceWithoutTarget(t *testing.T) {
	log := serveLog(t, `sources:
  - name: bare
    scheme: none
    allow_ips: ["127.0.0.1"]
  - name: kept
    scheme: none
    allow_ips: ["127.0.0.1"]
    store_only: true
`)
	if n := strings.Count(log, "no forward, exec or targets: its events are stored"); n != 1 {
		t.Fatalf("%d no-target warnings, want 1; log:\n%s", n, log)
	}
	if logLine(log, "level=WARN", "source bare has no forward, exec or targets", "store_only: true") == "" {
		t.Fatalf("no WARN naming source bare and store_only; log:\n%s", log)
	}
}

// TestServeStartSummary: the start line says the address, version, store,
// each source with its scheme and target, admin and retention; never a
// secret nor the database password.
func TestServeStartSummary(t *testing.T) {
	doc := `retention_days: 30
admin_token: "admin-token-value-0123456789"
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_c2VjcmV0LXZhbHVlLWZvci10ZXN0cw=="]
    forward: "http://127.0.0.1:1/hooks"
  - name: gh
    scheme: github
    secrets: ["github-secret-value-0123"]
    exec: ["true"]
  - name: kept
    scheme: github
    secrets: ["github-secret-value-4567"]
    store_only: true
`
	check := func(t *testing.T, log, store string) {
		t.Helper()
		line := logLine(log, "msg=listening")
		for _, want := range []string{"addr=127.0.0.1:", "version=", "store=" + store,
			"polar (standard-webhooks, forward)", "gh (github, exec)", "kept (github, store-only)",
			"admin=on", `retention="30 days"`, "payload_retention=off"} {
			if !strings.Contains(line, want) {
				t.Errorf("start line lacks %q: %s", want, line)
			}
		}
		for _, secret := range []string{"admin-token-value", "c2VjcmV0LXZhbHVl", "github-secret-value", "pw-not-shown"} {
			if strings.Contains(log, secret) {
				t.Errorf("the log shows a secret %q:\n%s", secret, log)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		check(t, serveLog(t, doc), "sqlite")
	})
	t.Run("postgres", func(t *testing.T) {
		u, err := url.Parse(pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		if u.User == nil || u.User.Username() == "" {
			t.Skip("HOOKBOX_TEST_POSTGRES names no user to add a password to")
		}
		if _, set := u.User.Password(); !set {
			// The test server trusts local connections: a password in
			// the URL is sent and ignored, and must never be logged.
			u.User = url.UserPassword(u.User.Username(), "pw-not-shown")
		}
		check(t, serveLog(t, doc, "--db", u.String()), "postgres")
	})
}

// TestServeWarnsAdminListenWithoutToken: serve warns at start that an
// admin_listen without admin_token serves no admin API and no console.
func TestServeWarnsAdminListenWithoutToken(t *testing.T) {
	log := serveLog(t, `admin_listen: "127.0.0.1:0"
sources:
  - name: kept
    scheme: none
    allow_ips: ["127.0.0.1"]
    store_only: true
`)
	if logLine(log, "level=WARN", "admin_listen is set but admin_token is not", "/admin/ and /ui/ need admin_token") == "" {
		t.Fatalf("no WARN about admin_listen without admin_token; log:\n%s", log)
	}
}

// listenedLog is a log writer that closes listened once serve has logged
// its start line.
type listenedLog struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	listened chan struct{}
}

func (l *listenedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if l.listened != nil && strings.Contains(l.buf.String(), "msg=listening") {
		close(l.listened)
		l.listened = nil
	}
	return len(p), nil
}

// TestServeRefusesASecondServeOnItsFile: a second `hookbox serve` on the
// SQLite file another serve is running on stops at start, saying that
// another serves it and what to do, while the first goes on; once the
// first has stopped, the next starts. Before, both ran without a word,
// each waking only its own workers for what it stored.
func TestServeRefusesASecondServeOnItsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.yaml")
	doc := "sources:\n  - name: gh\n    scheme: github\n    secrets: ['github-secret-value-0123']\n    store_only: true\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "hookbox.db")
	args := []string{"serve", "--config", path, "--db", "sqlite:" + db, "--listen", "127.0.0.1:0"}

	ctx, stopFirst := context.WithCancel(context.Background())
	defer stopFirst()
	first := &listenedLog{listened: make(chan struct{})}
	listened := first.listened
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(first)
		root.SetArgs(args)
		done <- root.ExecuteContext(ctx)
	}()
	select {
	case <-listened:
	case err := <-done:
		t.Fatalf("the first serve ended: %v", err)
	}

	// The second stops at its start line if it gets that far.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	second := &startedLog{cancel: cancel2}
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(second)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx2)
	if err == nil {
		t.Fatalf("a second serve ran on the file the first serves:\n%s", second)
	}
	for _, want := range []string{"already serves " + db, "one hookbox serve per SQLite file", "stop the other first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the second serve's error %q does not say %q", err, want)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the first serve ended when the second started: %v", err)
	default:
	}

	stopFirst()
	if err := <-done; err != nil {
		t.Fatalf("the first serve: %v", err)
	}
	serveLog(t, doc, "--db", "sqlite:"+db)
}
