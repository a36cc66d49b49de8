package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/storetest"
)

// TestPostgresSmallPoolGoHandlers: a URL that sets a small pool_max_conns
// (2, 3 or 4) with Go handlers registered. A work transaction of Go
// handlers writes its mark on a second connection while it holds the
// first, and on PostgreSQL four of them ran at once whatever the pool's
// size: with a backlog they held every connection, each waited for one
// for its mark until the mark's timeout, failed, and sent the pool into
// crash recovery (one event per claim) while deliveries waited for a
// connection and were answered 503 (at 2 and 3 connections, the first
// live delivery). Now the work transactions are as many as the pool
// leaves room for: each delivery sent one at a time during the drain is
// stored (202), every event is worked, and nothing is logged as failed.
func TestPostgresSmallPoolGoHandlers(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint("pool_max_conns=", n), func(t *testing.T) {
			dbURL := pgtest.URL(t)
			backlog(t, dbURL, 400)
			logs := &syncbuf.Buffer{}
			small := dbURL + fmt.Sprintf("&pool_max_conns=%d", n)
			srv := e2e.StartLogged(t, testConfig, small, slog.New(slog.NewJSONHandler(logs, nil)), func(s *service.Service) error {
				s.Pool.Handle("polar", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
					var one int
					return tx.QueryRowContext(ctx, `SELECT 1 FROM pg_sleep(0.005)`).Scan(&one)
				})
				return nil
			})
			for i := range 20 {
				srv.Send("polar", fmt.Sprint("live-", i), []byte(`{}`)) // fails the test unless 202
			}
			srv.WaitIdle(2 * time.Minute)
			if got := len(srv.Events("polar")); got != 420 {
				t.Fatalf("%d events, want 420", got)
			}
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) {
					t.Errorf("logged: %s", l)
				}
			}
		})
	}
}

// backlog stores n deliveries of polar at dbURL, through a store of its
// own (the default pool), as a backlog for the next service to drain.
func backlog(t *testing.T, dbURL string, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds := make([]hookbox.Delivery, n)
	for i := range ds {
		ds[i] = storetest.Delivery("polar", fmt.Sprint("backlog-", i))
	}
	if _, err := st.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresPoolTooSmallForGoHandlers: Go handlers that pick in
// transactions need two pooled connections (a work transaction and its
// mark). With pool_max_conns=1, Serve refuses at start, saying what to
// set; before, it ran, and every claim held the only connection for the
// mark's timeout (2 s) while deliveries were answered 503.
func TestPostgresPoolTooSmallForGoHandlers(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = pgtest.URL(t) + "&pool_max_conns=1"
	// The deadline only ends a Serve that does not refuse.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Pool.Handle("polar", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Serve(ctx, ln)
	want := "pool_max_conns=1 is below the 2 connections Go handlers need"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "raise it") {
		t.Fatalf("Serve with pool_max_conns=1 and Go handlers: %v; want an error saying %q", err, want)
	}
}

// TestPostgresPoolOfOneTargets: hookbox serve's work (targets: forward,
// exec) holds no connection while it takes another, so a pool of one
// connection (pool_max_conns=1) drains a backlog while each delivery sent
// one at a time is stored, and nothing is logged as failed.
func TestPostgresPoolOfOneTargets(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer app.Close()
	cfg := fmt.Sprintf(`
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g="]
    forward: %s
`, app.URL)
	dbURL := pgtest.URL(t)
	backlog(t, dbURL, 400)
	logs := &syncbuf.Buffer{}
	srv := e2e.StartLogged(t, cfg, dbURL+"&pool_max_conns=1", slog.New(slog.NewJSONHandler(logs, nil)), nil)
	for i := range 50 {
		srv.Send("polar", fmt.Sprint("live-", i), []byte(`{}`))
	}
	srv.WaitIdle(2 * time.Minute)
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) {
			t.Errorf("logged: %s", l)
		}
	}
}
