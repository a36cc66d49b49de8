package target_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// TestForwardBacklogWithinPayloadBudget: a backlog of 16 payloads of
// 4 MiB, forwarded to an app that holds each request until the test lets
// it answer, with a payload budget of 8 MiB and 32 slots: the app never
// has more than two requests at once, and every event ends done. Before
// the budget, the pool claimed all 16 at once and forwarded them
// together, 64 MiB held. Both databases; the heap in use is printed.
func TestForwardBacklogWithinPayloadBudget(t *testing.T) {
	const size, n, budget = 4 << 20, 16, 8 << 20
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var running, peak atomic.Int64
		release := make(chan struct{})
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := running.Add(1)
			defer running.Add(-1)
			for old := peak.Load(); now > old && !peak.CompareAndSwap(old, now); old = peak.Load() {
			}
			if got, _ := io.Copy(io.Discard, r.Body); got != size {
				t.Errorf("the app got %d bytes, want %d", got, size)
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(app.Close)
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, MaxPayloadBytes: budget})
		p.Route("big", newForward(t, target.ForwardOptions{URL: app.URL}))
		var last []hookbox.Receipt
		for i := range n {
			d := hookbox.Delivery{Source: "big", DeliveryID: fmt.Sprint(i), Payload: bytes.Repeat([]byte{byte(i)}, size), ReceivedAt: time.Now()}
			var err error
			if last, err = s.Ingest(context.Background(), []hookbox.Delivery{d}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Stop(ctx)
		})
		var heapPeak uint64
		for range n {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			heapPeak = max(heapPeak, m.HeapInuse)
			select {
			case release <- struct{}{}:
			case <-time.After(20 * time.Second):
				t.Fatal("no request came to the app within 20 s")
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			e, err := s.Event(context.Background(), last[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status == hookbox.StatusDone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the last event is %s 20 s after the app answered everything", e.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%d payloads of %d MiB, budget %d MiB: at most %d requests at the app at once; heap in use at most %d MiB",
			n, size>>20, budget>>20, peak.Load(), heapPeak>>20)
		if got := peak.Load(); got > budget/size {
			t.Errorf("%d requests of %d MiB at the app at once, past the budget of %d MiB", got, size>>20, budget>>20)
		}
	})
}

// TestForwardSendsThePayloadUncopied: forwarding an 8 MiB payload, signed
// or not, allocates far less than the payload: the request body reads the
// event's bytes, and the signature (an HMAC) is computed over them in
// place.
func TestForwardSendsThePayloadUncopied(t *testing.T) {
	const size = 8 << 20
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(app.Close)
	ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: bytes.Repeat([]byte("x"), size)}
	for _, signed := range []bool{false, true} {
		opts := target.ForwardOptions{URL: app.URL}
		if signed {
			opts.Sign = &target.SignOptions{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
		}
		f := newForward(t, opts)
		if err := f.Deliver(context.Background(), ev); err != nil { // warms the connection up
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := f.Deliver(context.Background(), ev)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		grew := after.TotalAlloc - before.TotalAlloc
		t.Logf("a forward of %d MiB (signed %v) allocated %d KiB", size>>20, signed, grew>>10)
		if grew > size/8 {
			t.Errorf("a forward of %d MiB (signed %v) allocated %d KiB: a copy of the payload", size>>20, signed, grew>>10)
		}
	}
}
