package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// BenchmarkReceive is the receiving endpoint's own cost per delivery:
// signed 1 KiB bodies (GitHub's scheme) over keep-alive HTTP on loopback,
// to a store that keeps nothing, so what it measures is reading, budget,
// verification and reply (client included; compare runs, not absolutes).
func BenchmarkReceive(b *testing.B) {
	vc := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"bench-secret"}}
	v, err := verify.New(vc)
	if err != nil {
		b.Fatal(err)
	}
	var id atomic.Int64
	srv := New(Config{Sources: []Source{{Name: "gh", Verifier: v}},
		Ingest: func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) {
			return hookbox.Receipt{ID: id.Add(1)}, nil
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	body := bytes.Repeat([]byte("x"), 1024)
	h, err := verify.Sign(vc, body, "bench", time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	h.Set("X-GitHub-Event", "push")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/webhooks/gh", bytes.NewReader(body))
			req.Header = h.Clone()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Error("status " + strconv.Itoa(resp.StatusCode))
				return
			}
		}
	})
}
