package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// ownDatabase creates a database for this test alone (ALTER DATABASE must
// not touch the database other tests share), dropped when the test ends.
// It returns a connection to the server's own database for the test's
// administration, and the new database's name and URL.
func ownDatabase(t *testing.T) (admin *pgx.Conn, name, dbURL string) {
	t.Helper()
	base := os.Getenv(pgtest.EnvURL)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(pgtest.EnvURL + " must be set in CI")
		}
		t.Skip(pgtest.EnvURL + " is not set; skipping PostgreSQL test")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name = "hb_db_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close(context.Background())
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return admin, name, u.String()
}

// TestWritableAgainAfterReadOnly: the database turns read-only (as after
// a failover to a standby, or default_transaction_read_only set and the
// sessions ended), then writable again without its sessions being ended.
// While read-only, ingest, claims and work transactions fail with
// ErrUnavailable (a 503: the sender retries), and the store says so in a
// line or two, not one per statement. Once writable, all three succeed
// again without a restart: each session keeps the read-only default it
// started with, and a pooled connection that had been refused a write
// used to be handed out again and refused again until it aged out (an
// hour).
func TestWritableAgainAfterReadOnly(t *testing.T) {
	admin, name, dbURL := ownDatabase(t)
	ctx := context.Background()
	var logs syncbuf.Buffer
	s, err := postgres.Open(ctx, dbURL, postgres.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "before")}); err != nil {
		t.Fatal(err)
	}
	claim := func() error {
		_, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("o-", time.Now().UnixNano()), Limit: 10, Lease: time.Minute, Sources: []string{"s"}})
		return err
	}
	// work opens a work transaction, picks in it (which locks rows: a
	// write) and commits.
	work := func() error {
		w, err := s.BeginWork(ctx)
		if err != nil {
			return err
		}
		defer w.Rollback()
		if _, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Sources: []string{"s"}}); err != nil {
			return err
		}
		return w.Commit(ctx)
	}

	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	// Enough statements to use up every connection the pool holds, each
	// reconnected read-only (the first ones may fail on a terminated
	// session instead).
	failures := 0
	for i := 0; i < 10; i++ {
		_, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", fmt.Sprint("read-only-", i))})
		if !errors.Is(err, hookbox.ErrUnavailable) {
			t.Fatalf("ingest on a read-only database: %v; want ErrUnavailable", err)
		}
		if err := claim(); !errors.Is(err, hookbox.ErrUnavailable) {
			t.Fatalf("claim on a read-only database: %v; want ErrUnavailable", err)
		}
		if err := work(); !errors.Is(err, hookbox.ErrUnavailable) {
			t.Fatalf("work transaction on a read-only database: %v; want ErrUnavailable", err)
		}
		failures += 3
	}
	const said = "the database is read-only"
	if n := strings.Count(logs.String(), said); n == 0 || n > failures/2 {
		t.Errorf("%d lines say %q after %d refused statements; want a line, not one per statement. Log:\n%s", n, said, failures, logs.String())
	}

	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	// The sessions are not ended this time: the store must leave the
	// read-only ones itself.
	await := func(what string, f func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the database is writable again, %s still fails: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	await("ingest", func() error {
		_, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "after")})
		return err
	})
	await("a claim", claim)
	await("a work transaction", work)
}

// TestConnLifetimeBounded: pooled connections are renewed within minutes,
// not pgxpool's hour, so no session outlives a change of the server
// behind the URL (or of its settings) by long; the URL's own
// pool_max_conn_lifetime and pool_max_conn_lifetime_jitter win.
func TestConnLifetimeBounded(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		params           string
		lifetime, jitter time.Duration
	}{
		{"", 5 * time.Minute, time.Minute},
		{"pool_max_conn_lifetime=1h30m", 90 * time.Minute, time.Minute},
		{"pool_max_conn_lifetime_jitter=10s", 5 * time.Minute, 10 * time.Second},
		{"pool_max_conn_lifetime=2m&pool_max_conn_lifetime_jitter=0s", 2 * time.Minute, 0},
	} {
		u := base
		if c.params != "" {
			u += sep + c.params
		}
		s := open(t, u)
		if l, j := s.ConnLifetime(); l != c.lifetime || j != c.jitter {
			t.Errorf("URL parameters %q: connection lifetime %v, jitter %v; want %v, %v", c.params, l, j, c.lifetime, c.jitter)
		}
	}
}
