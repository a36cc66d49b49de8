package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// TestWaitingDeliveriesBounded: many more deliveries than the store can
// take, with small bodies, against a store that does not answer. The
// budget counted only their body bytes, 10 each, so all 200 waited for the
// store at once, each holding some 26 KiB besides (goroutines, buffers,
// the request), and each got its 503 only after StoreWait; nothing bounded
// their number but the connections. Now a delivery whose body is read
// counts its headers and requestOverhead too: at most budget/overhead
// wait, the rest are answered 503 with Retry-After while the store still
// holds the others, and once it answers every delivery that waited is
// stored and acknowledged.
func TestWaitingDeliveriesBounded(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	const budget, n = 1 << 20, 200
	var waiting, stored atomic.Int64
	release := make(chan struct{})
	srv := New(Config{Sources: []Source{{Name: "a", Verifier: v}}, MaxBodyBytes: 16 << 10, MaxInflightBodyBytes: budget,
		StoreWait: time.Hour, // the store's silence, not StoreWait, is what they wait on
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			waiting.Add(1)
			<-release
			return hookbox.Receipt{ID: stored.Add(1)}, nil
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var unblock sync.Once
	letGo := func() { unblock.Do(func() { close(release) }) }
	defer letGo()

	var answered, busy atomic.Int64
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/webhooks/a", strings.NewReader("0123456789"))
			req.Header.Set("X-Id", "d"+strconv.Itoa(i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				answered.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
				busy.Add(1)
			}
			answered.Add(1)
		}()
	}
	// Every delivery is either waiting for the store or answered, while
	// the store has answered none.
	waitFor(t, "every delivery to wait for the store or be answered", func() bool { return waiting.Load()+answered.Load() == n })
	w := waiting.Load()
	t.Logf("%d deliveries of 10 bytes against a budget of %d bytes and a store that does not answer: %d waited for it at once, %d answered 503 without waiting",
		n, budget, w, busy.Load())
	if w*requestOverhead > budget {
		t.Errorf("%d deliveries waited for the store at once, holding some %d KiB besides their bodies against a budget of %d KiB", w, w*requestOverhead>>10, budget>>10)
	}
	if busy.Load() != n-w {
		t.Errorf("%d answered while the store held the others, %d of them 503 with Retry-After; want all %d", answered.Load(), busy.Load(), n-w)
	}

	letGo()
	wg.Wait()
	accepted := 0
	for _, s := range statuses {
		if s == http.StatusAccepted {
			accepted++
		}
	}
	if int64(accepted) != w || stored.Load() != w {
		t.Errorf("%d waited, %d stored, %d acknowledged; want all three equal", w, stored.Load(), accepted)
	}
	waitFor(t, "the budget to be free", func() bool { return srv.budget.inUse() == 0 })
}
