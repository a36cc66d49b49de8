// Package e2e runs a whole hookbox service in a test: real config, real
// database, real HTTP on a loopback port, deliveries signed as the provider
// would sign them.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

// Server is a running service.
type Server struct {
	T   testing.TB
	URL string // http://127.0.0.1:port
	// Admin is the admin listener's http://127.0.0.1:port when the config
	// sets admin_listen (Start listens on a free port instead), else "".
	Admin string
	Svc   *service.Service
	Cfg   *config.Config

	stop func() error
}

// Start parses cfgYAML, points it at dbURL, lets register add handlers, and
// serves until the test ends.
func Start(t testing.TB, cfgYAML, dbURL string, register func(*service.Service) error) *Server {
	t.Helper()
	return StartLogged(t, cfgYAML, dbURL, nil, register)
}

// StartLogged is Start with the service logging to log.
func StartLogged(t testing.TB, cfgYAML, dbURL string, log *slog.Logger, register func(*service.Service) error) *Server {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = dbURL
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if register != nil {
		if err := register(svc); err != nil {
			cancel()
			svc.Close()
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{T: t, URL: "http://" + ln.Addr().String(), Svc: svc, Cfg: cfg}
	if cfg.AdminListen != "" {
		aln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		svc.AdminListener = aln
		srv.Admin = "http://" + aln.Addr().String()
	}
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	srv.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := srv.stop(); err != nil {
			t.Logf("serve: %v", err)
		}
	})
	return srv
}

// Stop shuts the service down as a signal would, and returns what Serve
// returned. The test's end stops it too.
func (s *Server) Stop() error { return s.stop() }

// Source returns the configured source called name.
func (s *Server) Source(name string) config.Source {
	for _, src := range s.Cfg.Sources {
		if src.Name == name {
			return src
		}
	}
	s.T.Fatalf("no source %q", name)
	return config.Source{}
}

// Reply is a decoded answer to a delivery.
type Reply struct {
	Status    int
	ID        int64  `json:"id"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
}

// Post sends body to /webhooks/source with the given headers.
func (s *Server) Post(source string, header http.Header, body []byte) Reply {
	s.T.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		s.T.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := Reply{Status: resp.StatusCode}
	if err := json.Unmarshal(b, &r); err != nil {
		s.T.Fatalf("reply %d is not JSON: %q", resp.StatusCode, b)
	}
	return r
}

// Send signs body for source with hookbox's own signer and posts it,
// expecting 202.
func (s *Server) Send(source, deliveryID string, body []byte) Reply {
	s.T.Helper()
	h, err := verify.Sign(s.Source(source).Verify(), body, deliveryID, time.Now())
	if err != nil {
		s.T.Fatal(err)
	}
	r := s.Post(source, h, body)
	if r.Status != http.StatusAccepted {
		s.T.Fatalf("delivery %s to %s: %+v", deliveryID, source, r)
	}
	return r
}

// WaitIdle waits until no event is pending or processing, failing after
// timeout. It reads both counts in one statement: two separate reads could
// each miss an event that moved between them.
func (s *Server) WaitIdle(timeout time.Duration) {
	s.T.Helper()
	ops := s.Svc.Store
	deadline := time.Now().Add(timeout)
	for {
		st, err := ops.Stats(context.Background(), time.Now())
		if err != nil {
			s.T.Fatal(err)
		}
		if st.ByStatus[hookbox.StatusPending]+st.ByStatus[hookbox.StatusProcessing] == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.T.Fatalf("queue still busy after %v: %v", timeout, st.ByStatus)
		}
		s.Svc.Pool.Notify()
		time.Sleep(10 * time.Millisecond)
	}
}

// Events lists every event of source.
func (s *Server) Events(source string) []hookbox.Event {
	s.T.Helper()
	evs, err := s.Svc.Store.Events(context.Background(), hookbox.Filter{Source: source, Limit: 1 << 30})
	if err != nil {
		s.T.Fatal(err)
	}
	return evs
}

// QueryInt runs a one-number query in a transaction on the service's
// database.
func (s *Server) QueryInt(q string, args ...any) int {
	s.T.Helper()
	var n int
	err := s.Svc.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, q, args...).Scan(&n)
	})
	if err != nil {
		s.T.Fatalf("%s: %v", q, err)
	}
	return n
}
