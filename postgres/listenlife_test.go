package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// listenWakes runs s.Listen until ctx ends and returns its wake-ups, one
// value each (up to 100 unread).
func listenWakes(ctx context.Context, s *postgres.Store) <-chan struct{} {
	wakes := make(chan struct{}, 100)
	go s.Listen(ctx, func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	})
	return wakes
}

// TestListenConnectionRenewed: the connection that listens for wake-ups
// is taken out of the pool, whose lifetime (pool_max_conn_lifetime) then
// no longer renews it; it ends itself at that age and Listen listens on a
// new one. It lived as long as the process, so after a switch of the
// server behind the URL, wake-ups stopped and workers fell back to
// polling.
func TestListenConnectionRenewed(t *testing.T) {
	base := pgtest.URL(t)
	app := fmt.Sprintf("hblisten%d", time.Now().UnixNano())
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	s := open(t, base+sep+"pool_max_conn_lifetime=1s&pool_max_conn_lifetime_jitter=0s&application_name="+app)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listenWakes(ctx, s)
	admin, err := pgx.Connect(context.Background(), os.Getenv(pgtest.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	listener := func() int {
		var pid int
		err := admin.QueryRow(context.Background(),
			`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&pid)
		if err != nil {
			return 0
		}
		return pid
	}
	first := 0
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pid := listener()
		if first == 0 {
			first = pid
		} else if pid != 0 && pid != first {
			return // listening on a new connection
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the same connection (pid %d) still listens, with a lifetime of 1 s", first)
		}
	}
}

// TestListenFailureLogged: while Listen cannot listen (the database cut
// off), the store says so once, whatever number of tries, and says so
// again once it listens. Before, a LISTEN that kept failing was never
// logged: the workers fell back to polling without a word.
func TestListenFailureLogged(t *testing.T) {
	proxy, viaProxy := faults.URLProxyFor(t, pgtest.URL(t))
	var logs syncbuf.Buffer
	s, err := postgres.Open(context.Background(), viaProxy, postgres.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := listenWakes(ctx, s)
	listening := func() {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(20 * time.Second):
			t.Fatalf("not listening after 20 s; log:\n%s", logs.String())
		}
	}
	listening()
	const cannot, again = "cannot listen for new events", "listening for new events again"
	await := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), what); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q line after 20 s; log:\n%s", what, logs.String())
			}
		}
	}
	proxy.Cut()
	await(cannot)
	// The outage goes on for several more tries (100 ms, then doubling).
	time.Sleep(time.Second)
	proxy.Restore()
	await(again)
	listening()
	if n := strings.Count(logs.String(), cannot); n != 1 {
		t.Errorf("%d %q lines in one outage, want 1; log:\n%s", n, cannot, logs.String())
	}
}
