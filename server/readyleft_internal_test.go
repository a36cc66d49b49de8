package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hookbox/hookbox/internal/syncbuf"
)

// TestReadyClientLeavingIsNotNotReady: a /readyz client that goes
// away while it waits for the check another request started is not a
// failed check: the store answered, so the log must not say "not ready"
// (then "ready again"). Any client, no token needed, could otherwise make
// the log of a healthy store read as a flapping one.
func TestReadyClientLeavingIsNotNotReady(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	logs := &syncbuf.Buffer{}
	s := New(Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Ready: func(ctx context.Context) error {
		<-release
		return nil
	}})
	ts := httptest.NewServer(s)
	defer ts.Close()

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	await(t, "the first /readyz checks", func() bool {
		s.ready.mu.Lock()
		defer s.ready.mu.Unlock()
		return s.ready.cur != nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan struct{})
	go func() {
		defer close(left)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	await(t, "the second /readyz waits for the check", func() bool { return s.readyWaiting() == 1 })
	cancel() // the client leaves
	<-left
	await(t, "the second /readyz has returned", func() bool { return s.readyWaiting() == 0 })
	once.Do(func() { close(release) })
	if c := <-first; c != http.StatusOK {
		t.Fatalf("first /readyz = %d, want 200", c)
	}
	// One more, passing, for a "ready again" line to show.
	if resp, err := http.Get(ts.URL + "/readyz"); err == nil {
		resp.Body.Close()
	}
	if out := logs.String(); strings.Contains(out, "not ready") || strings.Contains(out, "ready again") {
		t.Errorf("a client leaving /readyz while the store answered is logged as a failed check:\n%s", out)
	}
}
