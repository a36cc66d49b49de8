package faults_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/verify"
)

// TestTwoProcessesOneKeyAtATime runs two hookbox serve processes on one
// PostgreSQL schema with a target whose order_by is a header, sends each
// delivery to one of them (so their ingest transactions commit ids of one
// key out of order), and lets both forward to an app that notes, per key,
// whether a request arrives while another of its key is still running.
// None may: one delivery of a key at a time, across processes. Every
// delivery arrives, once.
func TestTwoProcessesOneKeyAtATime(t *testing.T) {
	needBinary(t)
	t.Parallel()
	total, keys := 3000, 50
	if *fullRun {
		total = 20000
	}
	var (
		mu       sync.Mutex
		running  = map[string]int{}
		got      = map[string]int{} // delivery id → requests
		overlaps []string
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		key, id := r.Header.Get("X-Key"), r.Header.Get("Webhook-Id")
		mu.Lock()
		if running[key] > 0 && len(overlaps) < 10 {
			overlaps = append(overlaps, fmt.Sprintf("%s (%s)", key, id))
		}
		running[key]++
		got[id]++
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond) // the app at work
		mu.Lock()
		running[key]--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer app.Close()

	dbURL := pgtest.URL(t)
	dir := t.TempDir()
	src := polarSrc
	cfg := writeConfig(t, dir, serverSpec{db: dbURL, sources: []source{src}, forward: app.URL,
		targets: []string{"app"}, orderBy: "header:X-Key",
		// Each process's ingest transaction stays open a little longer,
		// so the other's commits cross it more often.
		extra: "ingest:\n  batch_wait: 3ms\n"})
	var procs []*faults.Process
	for i := range 2 {
		procs = append(procs, newServer(t, mkdir(t, filepath.Join(dir, fmt.Sprint("p", i))), cfg).start())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				id := fmt.Sprint("ord-", n)
				body := fmt.Appendf(nil, `{"type":"order.paid","n":%d}`, n)
				hdr, err := verify.Sign(src.vc, body, id, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, procs[n%2].URL()+"/webhooks/"+src.name, bytes.NewReader(body))
				for k, v := range hdr {
					req.Header[k] = v
				}
				req.Header.Set("X-Key", fmt.Sprint("k", rand.IntN(keys)))
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("%s: %v", id, err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("%s: %d", id, resp.StatusCode)
				}
			}
		}()
	}
	start := time.Now()
	for n := range total {
		work <- n
	}
	close(work)
	wg.Wait()
	arrived := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for arrived() < total && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range got {
		if n > 1 {
			twice++
		}
	}
	t.Logf("two processes, %d deliveries over %d keys forwarded in %v; %d arrived twice, %d overlaps",
		total, keys, time.Since(start).Round(time.Millisecond), twice, len(overlaps))
	if len(got) != total {
		t.Errorf("%d of %d deliveries reached the app", len(got), total)
	}
	if twice > 0 {
		t.Errorf("%d deliveries reached the app twice (no process died, no attempt failed)", twice)
	}
	if len(overlaps) > 0 {
		t.Errorf("a delivery arrived while another of its key ran: %v", overlaps)
	}
}
