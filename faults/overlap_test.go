package faults_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/verify"
)

var overlapFlag = flag.Int("faults.overlap", 0,
	"deliveries in TestThreeProcessesOverlappingIngest, each sent to all three processes (default 3000, or 100000 with -faults.full)")

// TestThreeProcessesOverlappingIngest runs three hookbox serve processes on
// one PostgreSQL schema and sends every delivery to all three at once, from
// many connections (issue 12): their ingest transactions, each filled with
// several batches, take overlapping keys in different orders. No delivery
// may get 503 (a deadlock or lock timeout between them is redone inside
// hookbox), every answer is 202, and of the three answers for one delivery
// exactly one says new.
func TestThreeProcessesOverlappingIngest(t *testing.T) {
	needBinary(t)
	t.Parallel()
	total := 3000
	if *fullRun {
		total = 100000
	}
	if *overlapFlag > 0 {
		total = *overlapFlag
	}
	dbURL := pgtest.URL(t)
	srcs := []source{polarSrc, githubSrc}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, serverSpec{db: dbURL, sources: srcs})
	var procs []*faults.Process
	for i := range 3 {
		d := filepath.Join(dir, fmt.Sprint("p", i))
		srv := newServer(t, mkdir(t, d), cfg)
		procs = append(procs, srv.start())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var (
		next                         atomic.Int64
		accepted, unavailable, other atomic.Int64
		mu                           sync.Mutex
		news                         = make([]int8, total)
		examples                     []string
	)
	send := func(p *faults.Process, n int) {
		src := srcs[n%len(srcs)]
		id := fmt.Sprintf("ov-%d", n)
		body := fmt.Appendf(nil, `{"type":"order.paid","n":%d,"note":"caf\u00e9"}`, n)
		hdr, err := verify.Sign(src.vc, body, id, time.Now())
		if err != nil {
			panic(err)
		}
		req, _ := http.NewRequest(http.MethodPost, p.URL()+"/webhooks/"+src.name, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			other.Add(1)
			mu.Lock()
			examples = append(examples, err.Error())
			mu.Unlock()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted:
			accepted.Add(1)
			var v struct{ Duplicate bool }
			if json.Unmarshal(b, &v) == nil && !v.Duplicate {
				mu.Lock()
				news[n]++
				mu.Unlock()
			}
		case http.StatusServiceUnavailable:
			unavailable.Add(1)
			mu.Lock()
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s: 503 %s", id, b))
			}
			mu.Unlock()
		default:
			other.Add(1)
			mu.Lock()
			examples = append(examples, fmt.Sprintf("%s: %d %s", id, resp.StatusCode, b))
			mu.Unlock()
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= total {
					return
				}
				var each sync.WaitGroup
				for _, p := range procs {
					each.Add(1)
					go func() { defer each.Done(); send(p, n) }()
				}
				each.Wait()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	notOnce := 0
	for n, c := range news {
		if c != 1 {
			notOnce++
			if notOnce <= 5 {
				t.Errorf("delivery %d: %d answers said new, want exactly 1", n, c)
			}
		}
	}
	t.Logf("three processes, %d deliveries sent to each (%d requests) in %v: %d answered 202, %d 503, %d other; %d deliveries not new exactly once",
		total, 3*total, took.Round(time.Millisecond), accepted.Load(), unavailable.Load(), other.Load(), notOnce)
	if unavailable.Load() != 0 || other.Load() != 0 {
		t.Errorf("%d answers of 503 and %d others, want none: %q", unavailable.Load(), other.Load(), examples)
	}
	st := openStore(t, dbURL)
	if n := countStatus(t, st, ""); n != total {
		t.Errorf("%d events stored, want %d", n, total)
	}
}

// mkdir creates dir and returns it.
func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
