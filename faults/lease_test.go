package faults_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestLeaseAfterKill: a process killed while a forward is in flight leaves
// its event leased for at most twice the source's attempt timeout (the
// documented lease), so another process works it again soon after. The
// first attempt is held at the target until the server is killed, long
// enough for the worker to have extended the lease at least once. (This
// caught extensions that used DefaultPolicy's 60s lease whatever the
// source's timeout.)
func TestLeaseAfterKill(t *testing.T) {
	needBinary(t)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const timeout = time.Second // the config's timeout; the lease is twice that
		var mu sync.Mutex
		attempts := map[string]time.Time{} // Hookbox-Attempt → arrival
		held := make(chan struct{}, 1)
		release := make(chan struct{})
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a := r.Header.Get("Hookbox-Attempt")
			mu.Lock()
			if _, ok := attempts[a]; !ok {
				attempts[a] = time.Now()
			}
			mu.Unlock()
			if a == "1" {
				select {
				case held <- struct{}{}:
				default:
				}
				select { // hold the first attempt until the test is done with it
				case <-release:
				case <-r.Context().Done():
				}
				http.Error(w, "held", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(target.Close)
		t.Cleanup(func() { close(release) })

		dir := t.TempDir()
		srv := newServer(t, dir, writeConfig(t, dir, serverSpec{db: dbURL, sources: []source{polarSrc}, forward: target.URL}))
		p := srv.start()
		body := []byte(`{"type":"lease.test"}`)
		r := rawDo(p.Addr(), rawRequest{method: "POST", target: "/webhooks/polar",
			header: pairs(signedHeader(t, polarSrc, "msg_lease", body, time.Now())), body: body}, 10*time.Second)
		if r.status != http.StatusAccepted {
			t.Fatalf("delivery: %d %q %v", r.status, r.body, r.err)
		}
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("the first attempt never reached the target")
		}
		// The worker extends leases every third of the shortest lease
		// (667ms here): after 900ms in flight at least one extension ran.
		time.Sleep(900 * time.Millisecond)
		srv.kill()
		killedAt := time.Now()

		st := openStore(t, dbURL)
		evs, err := st.Events(context.Background(), hookbox.Filter{Source: "polar", Limit: 10})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events: %v %v", evs, err)
		}
		e := evs[0]
		if left := e.NextAttemptAt.Sub(killedAt); e.Status == hookbox.StatusProcessing && left > 2*timeout+250*time.Millisecond {
			t.Errorf("after the kill the event stays leased for %s more (owner %s), want at most the lease of 2 × timeout = %s",
				left.Round(time.Millisecond), e.LeaseOwner, 2*timeout)
		}

		srv.start()
		waitFor(t, 2*timeout+15*time.Second, "the event worked again after the kill", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			_, ok := attempts["2"]
			return ok, "no second attempt yet"
		})
		mu.Lock()
		again := attempts["2"].Sub(killedAt)
		mu.Unlock()
		t.Logf("second attempt %s after the kill", again.Round(time.Millisecond))
		if again > 2*timeout+2*time.Second { // the lease, then the 1s poll and a margin
			t.Errorf("second attempt only %s after the kill, want within the lease (%s) and a poll", again.Round(time.Millisecond), 2*timeout)
		}
		srv.stop()
	})
}
