package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestRefusedConnectionWaitedFor: a read (Stats) and a transaction of
// InTx that need a new connection while the server refuses one (SQLSTATE
// 53300: the role's CONNECTION LIMIT is reached by the pool's own
// connections, all in use) wait for one of the pool's, as ingest does,
// log a warning that says why and what to change, and go on once one is
// back. Before, each failed at the first refusal: while Go handlers kept
// a pool larger than the server allows busy, reads failed (the console,
// a test's check of the queue).
func TestRefusedConnectionWaitedFor(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		op  string
		run func(s *postgres.Store) error
	}{
		{"stats", func(s *postgres.Store) error {
			st, err := s.Stats(ctx, time.Now())
			if err == nil && st.ByStatus[hookbox.StatusPending] != 1 {
				err = fmt.Errorf("stats: %v, want one event pending", st.ByStatus)
			}
			return err
		}},
		{"in tx", func(s *postgres.Store) error {
			return s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				_, err := tx.ExecContext(ctx, `SELECT 1`)
				return err
			})
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			const limit = 3
			role, dbURL := pgtest.LimitedRole(t, limit)
			before := open(t, dbURL)
			if _, err := before.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
				t.Fatal(err)
			}
			before.Close()
			// The closed store's backends (its pool's and those it
			// migrated through) end a moment after it closes, and count
			// against the limit until they do.
			pgtest.AwaitNoSessions(t, role)

			logs := &syncbuf.Buffer{}
			s, err := postgres.Open(ctx, dbURL+"&pool_max_conns=4", postgres.Options{
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			// Long enough that only a wrong answer ends the wait below.
			s.SetRefusedWait(time.Minute)
			var held []*pgxpool.Conn
			for range limit {
				c, err := s.AcquireConn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			t.Cleanup(func() {
				for _, c := range held {
					c.Release()
				}
			})

			done := make(chan error, 1)
			go func() { done <- tc.run(s) }()
			const warning = "the server refuses the pool a new connection"
			for !strings.Contains(logs.String(), warning) {
				select {
				case err := <-done:
					t.Fatalf("%s with every connection the server allows in use by the pool: %v, at once; want it to wait for one of the pool's", tc.op, err)
				case <-time.After(time.Millisecond):
				}
			}
			held[0].Release()
			held = held[1:]
			if err := <-done; err != nil {
				t.Fatalf("%s once a connection of the pool is back: %v", tc.op, err)
			}
			line := logs.String()
			for _, want := range []string{"level=WARN", "postgres: " + warning, "53300", "pool_max_conns"} {
				if !strings.Contains(line, want) {
					t.Errorf("the log does not say %q:\n%s", want, line)
				}
			}
		})
	}
}

// TestRefusedWhileConnectionGivenBack: an acquire that finds every
// connection of the pool in use connects a new one; when the server
// refuses it (53300) after the others were given back, it takes one of
// those, idle now, instead of failing because none is in use. Before,
// the refusal was returned at once: under load, service's
// TestPostgresPoolLargerThanServerAllows had its first delivery answered
// 503 about one run in twenty, ingest's new connection refused while
// Serve's start-up reads gave back theirs (the pool then held two idle
// connections, none in use, and the role's four sessions were all
// hookbox's own). Here the connection is given back as the new one is
// about to connect (the pool's BeforeConnect), and the role's limit is
// reached by it and another app's.
func TestRefusedWhileConnectionGivenBack(t *testing.T) {
	const limit = 2
	ctx := context.Background()
	_, dbURL := pgtest.LimitedRole(t, limit)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = limit + 2
	var giveBack atomic.Pointer[pgxpool.Conn]
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		if c := giveBack.Swap(nil); c != nil {
			c.Release()
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	pid := held.Conn().PgConn().PID()
	giveBack.Store(held)
	// Long enough that only a wrong answer ends the wait.
	c, err := postgres.WaitingAcquire(ctx, pool, time.Minute)
	if err != nil {
		t.Fatalf("acquire, its new connection refused once the pool's other was given back: %v; want the one given back", err)
	}
	defer c.Release()
	if giveBack.Load() != nil {
		t.Fatal("the acquire took the pool's connection without connecting: the case was not exercised")
	}
	if got := c.Conn().PgConn().PID(); got != pid {
		t.Errorf("the acquire has the connection of pid %d, want the one given back (pid %d)", got, pid)
	}
}
