package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readyWaiting is how many requests wait for the check running.
func (s *Server) readyWaiting() int {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	return s.ready.waiting
}

// await polls cond until it holds, failing the test after 10 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// TestReadyChecksShared: a flood of /readyz against a store that answers
// runs one check at a time, the others sharing its result. Each check on
// SQLite takes the connection ingest's group commit writes through, and
// with a check per request an unauthenticated flood queued as many
// callers for it as it had requests (32 checks here, before).
func TestReadyChecksShared(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	s := New(Config{Ready: func(ctx context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}})
	ts := httptest.NewServer(s)
	defer ts.Close()
	var once sync.Once
	defer once.Do(func() { close(release) }) // before Close, if the test fails

	const n = 32
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := http.Get(ts.URL + "/readyz")
			if err != nil {
				t.Error(err)
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	// Every request is either checking or waiting for the check.
	await(t, "every /readyz is in a check or waits for one", func() bool {
		return int(calls.Load())+s.readyWaiting() == n
	})
	once.Do(func() { close(release) })
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("/readyz = %d, want 200", c)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("%d /readyz at once ran %d checks of the store, want 1", n, got)
	}
}

// TestReadyCheckOutlivesItsClient: the request whose arrival started a
// check may go away; the requests waiting for that check get its real
// result, not the first client's cancellation.
func TestReadyCheckOutlivesItsClient(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	s := New(Config{Ready: func(ctx context.Context) error {
		calls.Add(1)
		<-release
		return ctx.Err()
	}})
	ts := httptest.NewServer(s)
	defer ts.Close()
	var once sync.Once
	defer once.Do(func() { close(release) }) // before Close, if the test fails

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	await(t, "the first /readyz checks", func() bool { return calls.Load() == 1 })
	second := make(chan int, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			t.Error(err)
			second <- 0
			return
		}
		resp.Body.Close()
		second <- resp.StatusCode
	}()
	await(t, "the second /readyz waits for the first's check", func() bool { return s.readyWaiting() == 1 })
	cancel()
	<-first
	once.Do(func() { close(release) })
	if c := <-second; c != http.StatusOK {
		t.Errorf("/readyz = %d after the client that started its check left, want 200", c)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("ran %d checks, want 1", got)
	}
}
