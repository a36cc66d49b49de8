package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

// limitedRole is pgtest.LimitedRole.
func limitedRole(t *testing.T, limit int) (role, dbURL string) { return pgtest.LimitedRole(t, limit) }

// hogs holds connections at dbURL (another app's), closed by release or
// when the test ends.
type hogs struct {
	t     *testing.T
	conns []*pgx.Conn
}

// takeAll opens connections at dbURL until the server refuses one, and
// returns the refusal.
func (h *hogs) takeAll(dbURL string) error {
	h.t.Helper()
	for range 100 {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			return err
		}
		h.conns = append(h.conns, c)
	}
	h.t.Fatal("the server took 100 connections: the role's limit does not hold")
	return nil
}

func (h *hogs) pids() []int32 {
	var out []int32
	for _, c := range h.conns {
		out = append(out, int32(c.PgConn().PID()))
	}
	return out
}

func (h *hogs) release() {
	for _, c := range h.conns {
		c.Close(context.Background())
	}
	h.conns = nil
}

func newHogs(t *testing.T) *hogs {
	h := &hogs{t: t}
	t.Cleanup(h.release)
	return h
}

// TestPostgresStartNoConnectionFree: when the server has no connection
// free for hookbox's role (another app holds them all), the service
// refuses to start with an error that names the cause (SQLSTATE 53300)
// and says what to do; before, it gave only the server's refusal.
func TestPostgresStartNoConnectionFree(t *testing.T) {
	_, dbURL := limitedRole(t, 2)
	other := newHogs(t)
	if err := other.takeAll(dbURL); err == nil || !strings.Contains(err.Error(), "53300") {
		t.Fatalf("the role's limit: %v", err)
	}
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = dbURL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.New(ctx, cfg, nil)
	if err == nil {
		svc.Close()
		t.Fatal("the service started with no connection free")
	}
	if !errors.Is(err, hookbox.ErrTooManyConnections) || !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("error %v does not match ErrTooManyConnections and ErrUnavailable", err)
	}
	for _, want := range []string{"53300", "max_connections", "CONNECTION LIMIT", "close some of their connections or raise the limit", "pool_max_conns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestPostgresConnectionsRefusedMidRun: while the server refuses hookbox
// every new connection (another app took every one it had free, and
// hookbox's own were ended), each delivery is answered 503 or stored
// (202), never hanging past its deadline, and /readyz answers 503 saying
// the database refuses more connections (before: "store unreachable").
// Once the other app lets go, deliveries are stored again, /readyz is
// ready, and every delivery acknowledged is stored and worked.
func TestPostgresConnectionsRefusedMidRun(t *testing.T) {
	role, dbURL := limitedRole(t, 8)
	logs := &syncbuf.Buffer{}
	srv := e2e.StartLogged(t, testConfig, dbURL+"&pool_max_conns=3", slog.New(slog.NewJSONHandler(logs, nil)), func(s *service.Service) error {
		s.Pool.Handle("polar", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		return nil
	})
	var acked []string
	send := func(id string) int {
		t.Helper()
		body := []byte(`{}`)
		h, err := verify.Sign(srv.Source("polar").Verify(), body, id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r := srv.Post("polar", h, body)
		switch r.Status {
		case http.StatusAccepted:
			acked = append(acked, id)
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("delivery %s: %+v; want 202 or 503", id, r)
		}
		return r.Status
	}
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 5 {
		if code := send(fmt.Sprint("before-", i)); code != http.StatusAccepted {
			t.Fatalf("before the other app: %d", code)
		}
	}

	other := newHogs(t)
	if err := other.takeAll(dbURL); !strings.Contains(fmt.Sprint(err), "53300") {
		t.Fatalf("the role's limit: %v", err)
	}
	pgtest.AdminExec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND NOT pid = ANY($2)", role, other.pids())
	if err := other.takeAll(dbURL); !strings.Contains(fmt.Sprint(err), "53300") {
		t.Fatalf("the role's limit: %v", err)
	}
	refused := 0
	for i := range 5 {
		if send(fmt.Sprint("during-", i)) == http.StatusServiceUnavailable {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("every delivery was stored while the server refused every new connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "refuses more connections") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/readyz while no connection is free: %d %s; want 503 saying the database refuses more connections", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	other.release()
	for i := 0; send(fmt.Sprint("after-", i)) != http.StatusAccepted; i++ {
		if ctx.Err() != nil {
			t.Fatal("no delivery stored once connections were free again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		code, body := readyz()
		if code == http.StatusOK {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/readyz once connections are free again: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.WaitIdle(time.Minute)
	done := map[string]bool{}
	for _, ev := range srv.Events("polar") {
		done[ev.DeliveryID] = ev.Status == hookbox.StatusDone
	}
	for _, id := range acked {
		if !done[id] {
			t.Errorf("delivery %s was acknowledged (202) but is not stored and done", id)
		}
	}
}

// TestPostgresPoolLargerThanServerAllows: a pool_max_conns (here the
// default, 16) larger than what the server leaves free (a role limited
// to 4 connections, one of them the listener's). While Go handlers drain a
// backlog, the pool keeps asking the server for connections it refuses
// (SQLSTATE 53300); each delivery sent one at a time is still stored
// (202): ingest waits for one of the pool's own connections, which free
// up within milliseconds, instead of answering 503 at the first refusal.
func TestPostgresPoolLargerThanServerAllows(t *testing.T) {
	_, dbURL := limitedRole(t, 4)
	backlog(t, dbURL, 400)
	srv := e2e.Start(t, testConfig, dbURL, func(s *service.Service) error {
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
}
