package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * 100 * time.Microsecond) // 0.1ms .. 100ms
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50100 * time.Microsecond}, {0.99, 99100 * time.Microsecond}, {0.01, 1100 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want*96/100 || got > c.want*101/100 {
			t.Errorf("q%.2f = %v, want about %v", c.q, got, c.want)
		}
	}
	if h.max != 100*time.Millisecond {
		t.Errorf("max = %v", h.max)
	}
}

func TestRunCountsEveryRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != "hello" || r.Header.Get("X-N") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Options{
		URL: srv.URL + "/x", Connections: 4, Count: 500, Body: []byte("hello"),
		Next: func(i int) Request { return Request{Header: http.Header{"X-N": {"1"}}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 500 || res.Status[http.StatusAccepted] != 500 || res.Errors != 0 || res.RPS <= 0 || res.P99 < res.P50 {
		t.Fatalf("result = %+v", res)
	}
}

// TestRunUntil: a run with Until sends until the channel is closed and
// reports no error for it.
func TestRunUntil(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	until := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() { close(until) })
	res, err := Run(context.Background(), Options{URL: srv.URL, Connections: 2, Count: 1 << 40,
		Next: func(int) Request { return Request{Header: http.Header{}} }, Until: until})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Status[http.StatusAccepted] != res.Requests {
		t.Fatalf("%+v", res)
	}
}

// TestRunRatesAcceptedOnly: answers other than 2xx and transport errors
// are counted apart and left out of the rate and the latencies; a run
// where nothing was accepted has no rate at all.
func TestRunRatesAcceptedOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Ok") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		time.Sleep(2 * time.Millisecond)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Options{URL: srv.URL, Connections: 4, Count: 400,
		Next: func(i int) Request {
			if i%4 == 0 {
				return Request{Header: http.Header{"X-Ok": {"1"}}}
			}
			return Request{Header: http.Header{}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 400 || res.Accepted != 100 || res.Status[http.StatusUnauthorized] != 300 || res.Failed() != 300 {
		t.Fatalf("result = %+v, want 400 sent, 100 accepted, 300 refused", res)
	}
	if got := res.RPS * res.Duration.Seconds(); got < 99 || got > 101 {
		t.Errorf("rate × duration = %.1f, want the 100 accepted", got)
	}
	if res.P50 < 2*time.Millisecond {
		t.Errorf("p50 %v: the refusals' latencies were counted", res.P50)
	}
	if !strings.Contains(res.String(), "300 of 400 not accepted") {
		t.Errorf("String() = %q, want the refusals said", res.String())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every request fails to dial
	res, err = Run(context.Background(), Options{URL: "http://" + addr + "/x", Connections: 2, Count: 20,
		Next: func(int) Request { return Request{Header: http.Header{}} }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 20 || res.Accepted != 0 || res.RPS != 0 || res.Failed() != 20 {
		t.Fatalf("result = %+v, want 20 transport errors and no rate", res)
	}
}
