package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestKilledMigrateLeavesNoSession: a `hookbox migrate` on PostgreSQL
// killed (SIGKILL) while one of its migrations waits for a lock another
// session holds (here an open transaction that wrote to event_data, as an
// older instance's ingest would hold while version 19 builds its index)
// leaves no session behind: the server notices the client is gone
// (client_connection_check_interval, PostgreSQL 14 and later) and ends its
// backend while the lock is still held. Before, the orphaned backend
// waited for the lock (with --db-timeout 0, for ever), then ran the
// migration's statement to its end, holding its locks meanwhile. A second
// migrate then brings the schema to the newest version.
func TestKilledMigrateLeavesNoSession(t *testing.T) {
	killWhileMigrating(t, func(dbURL string) *exec.Cmd {
		// No --db-timeout: nothing but the server's check ends the wait.
		return childCmd([]string{dbTimeoutEnv + "=0"}, "migrate", "--db", dbURL)
	})
}

// TestKilledServeMigrationLeavesNoSession: the same for a `hookbox serve`
// that migrates at start: its migrations run on sessions of their own
// that ask the server to check that the client is still there, so a
// serve killed while one waits for a lock leaves no session behind
// either. Before, they ran on serve's serving pool, without the check,
// and the orphaned backend waited for the lock for ever (serve sets no
// lock timeout).
func TestKilledServeMigrationLeavesNoSession(t *testing.T) {
	killWhileMigrating(t, func(dbURL string) *exec.Cmd {
		cfg := filepath.Join(t.TempDir(), "hookbox.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: "127.0.0.1:0"
db: %q
sources:
  - name: s
    scheme: none
    exec: ["true"]
`, dbURL)), 0o600); err != nil {
			t.Fatal(err)
		}
		return childCmd(nil, "serve", "--config", cfg)
	})
}

// killWhileMigrating brings a fresh PostgreSQL schema to version 18, holds
// the lock version 19's CREATE INDEX waits for, and starts the command
// start returns for a database URL (one whose sessions it can find by
// their application name) that migrates it. Once that CREATE INDEX waits
// for the lock, it kills the process and awaits the end of its backend
// while the lock is still held; then a `hookbox migrate` brings the schema
// to the newest version.
func killWhileMigrating(t *testing.T, start func(dbURL string) *exec.Cmd) {
	dbURL := pgtest.URL(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, postgres.Migrations(), goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatalf("migrate up to 18: %v", err)
	}
	// An open transaction that wrote to event_data: version 19's CREATE
	// INDEX waits for it.
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec(`LOCK TABLE event_data IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	app := fmt.Sprintf("migorphan%d", time.Now().UnixNano())
	cmd := start(withApplicationName(dbURL, app))
	out, exited := startChild(t, cmd)

	var backend int
	await(t, "the migration's CREATE INDEX to wait for the lock", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the process ended before it waited for the lock: %v\n%s", err, out)
		default:
		}
		err := db.QueryRow(`SELECT pid FROM pg_stat_activity WHERE application_name = $1
            AND wait_event_type = 'Lock' AND query LIKE 'CREATE INDEX%'`, app).Scan(&backend)
		if errors.Is(err, sql.ErrNoRows) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	<-exited
	await(t, fmt.Sprintf("the killed process's backend (pid %d) to end while the lock is held", backend), func() bool {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, backend).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	// The lock was held all along: the backend ended on its own, not
	// because the wait ended.
	if _, err := holder.Exec(`SELECT 1`); err != nil {
		t.Fatalf("the lock holder's transaction: %v", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if out := mustCLI(t, "migrate", "--db", dbURL); !strings.Contains(out, "version 19") {
		t.Fatalf("the second migrate printed %q; want version 19", out)
	}
}

// withApplicationName returns dbURL, a postgres:// URL or a key=value
// string, with application_name set to app, so that the test can find
// the sessions of a process it started in pg_stat_activity.
func withApplicationName(dbURL, app string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return dbURL + " application_name=" + app
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}
