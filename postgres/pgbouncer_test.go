package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/storetest"
)

// pgBouncer runs PgBouncer (the binary on PATH; the test is skipped
// without it) in front of the server of dbURL, in pool_mode mode, until
// the test ends, and returns dbURL with its host and port changed to
// PgBouncer's.
func pgBouncer(t *testing.T, dbURL, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		t.Skip("pgbouncer is not installed (apt-get install -y pgbouncer)")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	user := u.User.Username()
	password, _ := u.User.Password()
	server := fmt.Sprintf("host=%s port=%s user=%s", u.Hostname(), u.Port(), user)
	if password != "" {
		server += " password=" + password
	}
	if u.Port() == "" {
		server = strings.Replace(server, "port= ", "", 1)
	}
	dir := t.TempDir()
	ini := filepath.Join(dir, "pgbouncer.ini")
	users := filepath.Join(dir, "users.txt")
	conf := fmt.Sprintf(`[databases]
* = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
`, server, port, users, mode)
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte(strconv.Quote(user)+` ""`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{ini}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; nobody must read its files.
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args = []string{"-u", "nobody", ini}
	}
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("pgbouncer exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not listen on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	u.Host = addr
	return u.String()
}

// TestPgBouncer: behind a real PgBouncer in transaction or statement
// mode, where server sessions are shared between clients, Open refuses
// with ErrSharedSessions, saying to use session mode or a direct URL
// (before, it failed at random on prepared statements another client had
// left in the session, "prepared statement … already exists", and would
// have lost its LISTEN, its session settings and the migration's lock);
// in session mode hookbox migrates, ingests, is woken by LISTEN and
// drains every event once.
func TestPgBouncer(t *testing.T) {
	for _, mode := range []string{"transaction", "statement"} {
		t.Run(mode, func(t *testing.T) {
			_, _, dbURL := ownDatabase(t)
			direct := open(t, dbURL) // migrated, so Open goes as far as it can
			if _, err := direct.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
				t.Fatal(err)
			}
			pooled := pgBouncer(t, dbURL, mode)
			for _, opts := range []postgres.Options{{}, {Existing: true}} {
				s, err := postgres.Open(context.Background(), pooled, opts)
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, postgres.ErrSharedSessions) {
					t.Fatalf("open (existing %v) through PgBouncer in %s mode: %v; want ErrSharedSessions", opts.Existing, mode, err)
				}
				if !strings.Contains(err.Error(), "pool_mode = session") {
					t.Errorf("the refusal %q does not say what to do", err)
				}
			}
		})
	}
	t.Run("session", func(t *testing.T) {
		_, _, dbURL := ownDatabase(t)
		pooled := pgBouncer(t, dbURL, "session")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, b := open(t, pooled), open(t, pooled)
		var woken atomic.Int64
		listening := make(chan error, 1)
		go func() { listening <- b.Listen(ctx, func() { woken.Add(1) }) }()
		const total = 200
		for i := 0; i < total; i += 20 {
			var ds []hookbox.Delivery
			for j := i; j < i+20; j++ {
				ds = append(ds, storetest.Delivery("s", fmt.Sprint(j)))
			}
			if _, err := a.Ingest(ctx, ds); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[int64]bool{}
		for len(seen) < total {
			evs, err := b.Claim(ctx, hookbox.ClaimParams{Owner: "b", Limit: 50, Lease: time.Minute, Sources: []string{"s"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				t.Fatalf("%d events claimed, want %d", len(seen), total)
			}
			var outs []hookbox.Outcome
			now := time.Now()
			for _, e := range evs {
				if seen[e.ID] {
					t.Fatalf("event %d claimed twice", e.ID)
				}
				seen[e.ID] = true
				outs = append(outs, hookbox.Outcome{ID: e.ID, Owner: "b", Attempt: e.Attempts, Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now})
			}
			if _, err := b.Finish(ctx, outs); err != nil {
				t.Fatal(err)
			}
		}
		// The listener may have started after the first ingests: one more
		// must wake it.
		deadline := time.Now().Add(10 * time.Second)
		for woken.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("Listen woke %d times through PgBouncer in session mode", woken.Load())
			}
			if _, err := a.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", fmt.Sprint("late-", time.Now().UnixNano()))}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if err := <-listening; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen: %v", err)
		}
	})
}
