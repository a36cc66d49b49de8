package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestStatementTimeoutHeldLock: a store opened with a StatementTimeout
// (hookbox's commands other than serve) gives up on a read that waits for
// a lock another session holds (a migration, VACUUM FULL), at its
// lock_timeout, with an error TimedOut names as a lock wait; without one,
// the read waited until the lock was released, however long.
func TestStatementTimeoutHeldLock(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	open(t, dbURL) // migrates
	s, err := postgres.Open(context.Background(), dbURL, postgres.Options{Existing: true, StatementTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pgtest.HoldLock(t, dbURL, "events")

	done := make(chan error, 1)
	go func() {
		_, err := s.Events(context.Background(), hookbox.Filter{Limit: 1})
		done <- err
	}()
	const ceiling = 30 * time.Second // the bound is 0.9 s
	select {
	case err := <-done:
		if lock, ok := postgres.TimedOut(err); !ok || !lock {
			t.Errorf("Events under a held lock: %v; TimedOut = (lock %v, %v), want a lock wait", err, lock, ok)
		}
		if !errors.Is(err, hookbox.ErrUnavailable) {
			t.Errorf("Events under a held lock: %v, want it to match ErrUnavailable too", err)
		}
	case <-time.After(ceiling):
		t.Fatalf("Events still waiting for the lock after %v", ceiling)
	}
}

// TestStatementTimeoutStalledConnection: a store opened with a
// StatementTimeout gives up on a statement whose connection stops
// carrying bytes after the login (a hung server, a network or pooler
// that holds the connection open and passes nothing): the server's
// statement_timeout cannot help there, the client's own bound does.
// Without it, the read waited for as long as the stall lasted.
func TestStatementTimeoutStalledConnection(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	open(t, dbURL)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	s, err := postgres.Open(context.Background(), viaProxy, postgres.Options{Existing: true, StatementTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Events(context.Background(), hookbox.Filter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole()
	t.Cleanup(proxy.Restore)
	done := make(chan error, 1)
	go func() {
		_, err := s.Events(context.Background(), hookbox.Filter{Limit: 1})
		done <- err
	}()
	const ceiling = 40 * time.Second // the bound is 1 s + 5 s + 2 s for the cancel request
	select {
	case err := <-done:
		if lock, ok := postgres.TimedOut(err); !ok || lock {
			t.Errorf("Events on a stalled connection: %v; TimedOut = (lock %v, %v), want no answer", err, lock, ok)
		}
	case <-time.After(ceiling):
		t.Fatalf("Events still waiting on the stalled connection after %v", ceiling)
	}
}

// TestTimedOutLeavesOtherErrors: a failure to connect, which the connect
// timeout bounds, is no statement timeout.
func TestTimedOutLeavesOtherErrors(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), "postgres://u@127.0.0.1:1/db?sslmode=disable", postgres.Options{StatementTimeout: time.Second})
	if _, ok := postgres.TimedOut(err); err == nil || ok {
		t.Errorf("Open on a closed port: %v, TimedOut %v", err, ok)
	}
}

// TestBadURLSaysWhy: a URL pgx cannot parse is refused with pgx's reason
// (it was "cannot parse the database URL" and nothing else when pgx gave
// no wrapped cause), never with the URL or its password.
func TestBadURLSaysWhy(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		"postgres://user:s3cret@127.0.0.1:99999/db":                   "invalid port",
		"postgres://user:s3cret@127.0.0.1:5432/db?pool_max_conns=0":   "pool_max_conns too small",
		"postgres://user:s3cret@127.0.0.1:5432/db?pool_max_conns=x":   "cannot parse pool_max_conns",
		"postgres://user:s3cret@127.0.0.1:5432/db?connect_timeout=xs": "invalid connect_timeout",
	} {
		_, err := postgres.Open(context.Background(), u, postgres.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want the reason %q", u, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "user")) {
			t.Errorf("Open(%q): the error shows the URL: %v", u, err)
		}
	}
}

// TestClientCheckIntervalSetsSessions: a store opened with a
// ClientCheckInterval sets the sessions' client_connection_check_interval
// to it, after the connection is made (a startup parameter would be
// refused by a server before PostgreSQL 14), and its sessions work; a
// store opened without (serve's) leaves the server's default, no check,
// also when it migrated the schema as it opened (the first here), which
// it did through sessions of their own (see
// TestOpenAtCurrentVersionOpensNoMigrationPool, and
// TestKilledServeMigrationLeavesNoSession in cmd/hookbox).
func TestClientCheckIntervalSetsSessions(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	for _, c := range []struct {
		interval time.Duration
		want     string
	}{{0, "0"}, {1500 * time.Millisecond, "1500ms"}} {
		s, err := postgres.Open(context.Background(), dbURL, postgres.Options{ClientCheckInterval: c.interval})
		if err != nil {
			t.Fatal(err)
		}
		conn, err := s.AcquireConn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(context.Background(), `SHOW client_connection_check_interval`).Scan(&got)
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("ClientCheckInterval %v: the session's client_connection_check_interval is %s, want %s", c.interval, got, c.want)
		}
		if _, err := s.Events(context.Background(), hookbox.Filter{Limit: 1}); err != nil {
			t.Errorf("ClientCheckInterval %v: Events: %v", c.interval, err)
		}
		s.Close()
	}
	if _, err := postgres.Open(context.Background(), dbURL, postgres.Options{ClientCheckInterval: -time.Second}); err == nil {
		t.Error("a negative ClientCheckInterval is accepted")
	}
}

// TestOpenAtCurrentVersionOpensNoMigrationPool: a store opened on a
// schema at this hookbox's version (serve's start, every time but the
// first) only looks at it, on its own pool, and opens no pool of
// migration sessions: no more connections per start. A store opened on a
// fresh schema applies its migrations through such a pool, and its own
// sessions still have no client check. Not parallel: the count is the
// package's.
func TestOpenAtCurrentVersionOpensNoMigrationPool(t *testing.T) {
	ctx := context.Background()
	opened := func(what, dbURL string, want int64) {
		t.Helper()
		before := postgres.MigrationPools()
		s, err := postgres.Open(ctx, dbURL, postgres.Options{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer s.Close()
		if got := postgres.MigrationPools() - before; got != want {
			t.Errorf("%s opened %d migration pools, want %d", what, got, want)
		}
		conn, err := s.AcquireConn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		var check string
		if err := conn.QueryRow(ctx, `SHOW client_connection_check_interval`).Scan(&check); err != nil {
			t.Fatal(err)
		}
		if check != "0" {
			t.Errorf("%s: the store's session has client_connection_check_interval %s, want 0", what, check)
		}
	}
	dbURL := pgtest.URL(t)
	opened("Open of a fresh schema", dbURL, 1)
	opened("Open at the current version", dbURL, 0)
}
