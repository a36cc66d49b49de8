package service_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

// BenchmarkTargetRate measures how fast a target with `rate: 50` is
// delivered to, on SQLite: 650 events wait in the queue, and the rate is
// the deliveries started in the 10 s after the first second (the burst),
// divided by 10. It reports deliveries/s (want 50) and the most started in
// any one-second window.
//
//	go test -run XXX -bench TargetRate -benchtime 1x ./service/
func BenchmarkTargetRate(b *testing.B) {
	for range b.N {
		var mu sync.Mutex
		var starts []time.Time
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		srv := e2e.Start(b, fmt.Sprintf(`
sources:
  - name: r
    scheme: standard-webhooks
    secrets: [%q]
    targets:
      - {name: app, forward: %s, rate: 50}
`, shopSecret, app.URL), dbtest.SQLiteURL(b), nil)
		if err := srv.Svc.Store.PauseTarget(b.Context(), "r/app", "fill the queue first"); err != nil {
			b.Fatal(err)
		}
		for i := range 650 {
			srv.Send("r", fmt.Sprint("id-", i), []byte(`{"type":"x"}`))
		}
		if _, err := srv.Svc.Store.ResumeTarget(b.Context(), "r/app"); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(starts)
			mu.Unlock()
			if n >= 600 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		got := slices.Clone(starts)
		mu.Unlock()
		app.Close()
		if len(got) < 600 {
			b.Fatalf("only %d deliveries in 30 s", len(got))
		}
		from := got[0].Add(time.Second)
		window := 0
		peak := 0
		for i, s := range got {
			if !s.Before(from) && s.Before(from.Add(10*time.Second)) {
				window++
			}
			j := i
			for j < len(got) && got[j].Sub(s) < time.Second {
				j++
			}
			peak = max(peak, j-i)
		}
		b.ReportMetric(float64(window)/10, "deliveries/s")
		b.ReportMetric(float64(peak), "max_per_1s_window")
	}
}
