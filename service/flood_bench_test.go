package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/loadgen"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

// floodConfig: one standard-webhooks source, the rejected log bounded to
// 1000 rows and written at rate a second per source (burst as much, at
// least 1).
func floodConfig(rate float64) string {
	return fmt.Sprintf(`
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: [%q]
    store_only: true
rejected:
  max_count: 1000
  rate: %g
  burst: %d
`, rightSecret, rate, max(1, int(rate)))
}

// floodRound runs good deliveries alone or beside a flood of bad-signature
// ones and returns the good ones' p99 and the rejected rows kept.
func floodRound(b *testing.B, rate float64, good, bad int) (p99 time.Duration, kept int) {
	url, finish := startFloodService(b, rate)
	goodReqs := floodRequests(b, rightSecret, "good", good)
	var wg sync.WaitGroup
	var floodStatus map[int]int
	var floodErr error
	if bad > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			floodStatus, floodErr = floodFromChild(url, bad, time.Time{})
		}()
	}
	lat, status := paced(url, goodReqs, floodBody, goodRate)
	wg.Wait()
	if status[http.StatusAccepted] != good {
		b.Fatalf("good deliveries: %v", status)
	}
	if floodErr != nil || (bad > 0 && floodStatus[http.StatusUnauthorized] != bad) {
		b.Fatalf("flood: %v %v", floodStatus, floodErr)
	}
	return quantile(lat, 0.99), finish()
}

// floodBody is the body of every delivery of the flood benchmarks.
var floodBody = []byte(`{"type":"order.paid","data":{"id":"ord_1"}}`)

// startFloodService serves the flood benchmarks' config with the rejected
// log at rate a second on a fresh SQLite file, and returns the source's
// URL and a function that stops the service and returns the rejected rows
// it kept.
func startFloodService(b *testing.B, rate float64) (url string, finish func() int) {
	cfg, err := config.Parse([]byte(floodConfig(rate)))
	if err != nil {
		b.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(b.TempDir(), "flood.db")
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, nil)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String() + "/webhooks/polar", func() int {
		defer func() { cancel(); <-done }()
		svc.Rejections.Close() // flush what the writer holds
		rs, err := svc.Store.Rejections(context.Background(), hookbox.RejectionFilter{Limit: 100000})
		if err != nil {
			b.Fatal(err)
		}
		return len(rs)
	}
}

// floodRequests signs n deliveries of floodBody with secret, with ids
// prefix_0, prefix_1, …
func floodRequests(tb testing.TB, secret, prefix string, n int) []loadgen.Request {
	reqs := make([]loadgen.Request, n)
	for i := range reqs {
		h, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}}, floodBody,
			fmt.Sprintf("%s_%d", prefix, i), time.Now())
		if err != nil {
			tb.Fatal(err)
		}
		h.Set("Content-Type", "application/json")
		reqs[i] = loadgen.Request{Header: h}
	}
	return reqs
}

// floodFromChild sends bad wrong-secret deliveries to url from another
// process, at floodRate from now or, with a start, in the on-windows from
// start (see onWindows) (this test binary, running TestFloodSender), as an attacker's
// flood comes from elsewhere: in this process its client would share the
// Go scheduler and the heap with the server and the good deliveries'
// client, and be counted against them. It returns the answers by status.
func floodFromChild(url string, bad int, start time.Time) (map[int]int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodSender$", "-test.v")
	cmd.Env = append(os.Environ(), "HOOKBOX_FLOOD_URL="+url, "HOOKBOX_FLOOD_COUNT="+strconv.Itoa(bad))
	if !start.IsZero() {
		cmd.Env = append(cmd.Env, "HOOKBOX_FLOOD_START="+strconv.FormatInt(start.UnixNano(), 10))
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("flood sender: %w: %s", err, out)
	}
	_, js, ok := bytes.Cut(out, []byte("FLOOD "))
	if !ok {
		return nil, fmt.Errorf("flood sender printed no result: %s", out)
	}
	js, _, _ = bytes.Cut(js, []byte("\n"))
	var status map[int]int
	return status, json.Unmarshal(js, &status)
}

// TestFloodSender is the flood's process in BenchmarkRejectedFlood; it
// skips unless started by it.
func TestFloodSender(t *testing.T) {
	url := os.Getenv("HOOKBOX_FLOOD_URL")
	n, _ := strconv.Atoi(os.Getenv("HOOKBOX_FLOOD_COUNT"))
	if url == "" || n == 0 {
		t.Skip("the flood sender of BenchmarkRejectedFlood")
	}
	reqs := floodRequests(t, wrongSecret, "bad", n)
	var status map[int]int
	if at, _ := strconv.ParseInt(os.Getenv("HOOKBOX_FLOOD_START"), 10, 64); at != 0 {
		_, status = scheduled(url, reqs, floodBody, onWindows(time.Unix(0, at)))
	} else {
		_, status = paced(url, reqs, floodBody, floodRate)
	}
	js, _ := json.Marshal(status)
	fmt.Printf("FLOOD %s\n", js)
}

// floodSink starts TestFloodSink in a child process and returns its URL
// and a function that stops it.
func floodSink(b *testing.B) (url string, stop func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodSink$")
	cmd.Env = append(os.Environ(), "HOOKBOX_FLOOD_SINK=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "SINK ")
	if err != nil || !ok {
		b.Fatalf("flood sink: %q %v", line, err)
	}
	return "http://" + addr + "/webhooks/polar", func() { in.Close(); cmd.Wait() }
}

// TestFloodSink is the control of BenchmarkRejectedFloodInterleaved: a
// bare net/http server in a process of its own that reads each body and
// answers 401, as a receiver that costs this machine the flood's HTTP
// and nothing more. It prints its address and serves until its stdin
// closes; it skips unless started by the benchmark.
func TestFloodSink(t *testing.T) {
	if os.Getenv("HOOKBOX_FLOOD_SINK") == "" {
		t.Skip("the control sink of BenchmarkRejectedFloodInterleaved")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"no matching signature"}` + "\n"))
	})}
	go srv.Serve(ln)
	fmt.Printf("SINK %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// Rates of the benchmark's senders: the good deliveries at a steady pace,
// the flood five times as fast (10,000 in 5 s), both scheduled in advance
// so that a slow answer delays the next request's start and counts in its
// latency (no coordinated omission).
const (
	goodRate  = 400  // a second
	floodRate = 2000 // a second
)

// paced sends reqs at rate a second over 8 keep-alive connections and
// returns each request's latency, counted from when it was due, and the
// answers by status.
func paced(url string, reqs []loadgen.Request, body []byte, rate int) ([]time.Duration, map[int]int) {
	start := time.Now().Add(10 * time.Millisecond)
	return scheduled(url, reqs, body, func(i int) time.Time {
		return start.Add(time.Duration(i) * time.Second / time.Duration(rate))
	})
}

// scheduled sends each of reqs at due(i) over 8 keep-alive connections and
// returns each request's latency, counted from when it was due, and the
// answers by status. The connections are loadgen's hand-built HTTP/1.1
// clients, so that the senders, which share this machine's two cores with
// the server, take as little of them as they can.
func scheduled(url string, reqs []loadgen.Request, body []byte, due func(i int) time.Time) ([]time.Duration, map[int]int) {
	const conns = 8
	lat := make([]time.Duration, len(reqs))
	codes := make([]int, len(reqs))
	var wg sync.WaitGroup
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := loadgen.NewClient(url)
			if err != nil {
				return
			}
			defer c.Close()
			for i := w; i < len(reqs); i += conns {
				due := due(i)
				time.Sleep(time.Until(due))
				codes[i], _ = c.Post(reqs[i].Header, body)
				lat[i] = time.Since(due)
			}
		}()
	}
	wg.Wait()
	status := map[int]int{}
	for _, c := range codes {
		status[c]++
	}
	return lat, status
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// BenchmarkRejectedFlood measures what a flood of 10,000 bad-signature
// deliveries (2000 a second, sent from another process) does to good
// deliveries sent at the same time (400 a second), on SQLite. The good ones' p99 is taken alone, and beside
// the flood with the rejected log in three settings: off in effect (one
// rejection a million seconds), at its default rate (10 a second per
// source, burst 100), and unlimited (every rejection its queue admits,
// bounded to 1000 rows). The settings alternate within each round, and
// the medians over the rounds are reported; the bound is checked after
// every flood.
//
//	go test -run '^$' -bench RejectedFlood -benchtime 1x ./service
func BenchmarkRejectedFlood(b *testing.B) {
	const good, bad, rounds = 2000, 10000, 7
	settings := []struct {
		name  string
		rate  float64
		flood bool
	}{{"alone", 10, false}, {"log-off", 1e-6, true}, {"log-default", 10, true}, {"log-unlimited", 1e6, true}}
	p99s := make([][]time.Duration, len(settings))
	maxKept := 0
	for range b.N {
		for range rounds {
			for i, st := range settings {
				n := 0
				if st.flood {
					n = bad
				}
				p, kept := floodRound(b, st.rate, good, n)
				p99s[i] = append(p99s[i], p)
				maxKept = max(maxKept, kept)
			}
		}
	}
	if maxKept > 1000 {
		b.Fatalf("the rejected log held %d rows, bound 1000", maxKept)
	}
	med := make([]time.Duration, len(settings))
	for i, ds := range p99s {
		med[i] = quantile(ds, 0.5)
		b.ReportMetric(float64(med[i].Microseconds())/1000, "p99-"+settings[i].name+"-ms")
		b.Logf("%-13s p99 of %d good deliveries, median %v of %v", settings[i].name, good, med[i], ds)
	}
	b.ReportMetric(float64(med[2])/float64(med[1]), "default/off")
	b.ReportMetric(float64(med[3])/float64(med[1]), "unlimited/off")
	b.ReportMetric(float64(med[1])/float64(med[0]), "flood/alone")
	b.ReportMetric(float64(maxKept), "max-rows-kept")
}

// floodWindow is the length of the alternating windows of
// BenchmarkRejectedFloodInterleaved: the flood sends in the even ones.
// Short, so that a slow fsync (they come in bursts of hundreds of
// milliseconds here) falls on both kinds of window alike.
const floodWindow = 100 * time.Millisecond

// onWindows schedules the i-th flood delivery at floodRate within the
// even windows of floodWindow from start.
func onWindows(start time.Time) func(i int) time.Time {
	perWindow := floodRate * int(floodWindow) / int(time.Second)
	return func(i int) time.Time {
		w, k := i/perWindow, i%perWindow
		return start.Add(time.Duration(2*w)*floodWindow + time.Duration(k)*time.Second/floodRate)
	}
}

// BenchmarkRejectedFloodInterleaved measures the flood's effect on good
// deliveries with the disk's noise taken out: the good deliveries go at
// 400 a second without pause, the 10,000 bad ones (from another process)
// at 2000 a second in alternate windows of 100 ms, and each good
// delivery counts as "flood" or "quiet" by the window it was due in. Both
// kinds see the same disk at the same minutes, so their p99 ratio is the
// flood's cost; a p99 taken alone and another beside the flood minutes
// apart (BenchmarkRejectedFlood) mostly compares the disk's fsync latency
// at two moments on a shared machine.
//
// On a machine of two cores the flood's sender and whatever answers it
// compete with the good deliveries for the CPU wherever the flood goes.
// So each round is run twice: with the flood sent to hookbox ("hookbox"),
// and with the same flood sent to a bare net/http server in another
// process that answers 401 ("control": what any 2000 requests a second
// cost this machine). Their ratio is what hookbox's handling of the
// flood adds. Rounds are repeated and median ratios reported, with the
// rejected log at its default rate.
//
//	go test -run '^$' -bench RejectedFloodInterleaved -benchtime 1x ./service
func BenchmarkRejectedFloodInterleaved(b *testing.B) {
	const bad, rounds = 10000, 9
	var ratios, controls []float64
	var allFlood, allQuiet []time.Duration
	maxKept := 0
	for range b.N {
		for range rounds {
			flood, quiet, kept := interleavedRound(b, bad, false)
			ratios = append(ratios, float64(quantile(flood, 0.99))/float64(quantile(quiet, 0.99)))
			allFlood, allQuiet = append(allFlood, flood...), append(allQuiet, quiet...)
			maxKept = max(maxKept, kept)
			flood, quiet, _ = interleavedRound(b, bad, true)
			controls = append(controls, float64(quantile(flood, 0.99))/float64(quantile(quiet, 0.99)))
		}
	}
	if maxKept > 1000 {
		b.Fatalf("the rejected log held %d rows, bound 1000", maxKept)
	}
	slices.Sort(ratios)
	slices.Sort(controls)
	b.Logf("p99 flood / p99 quiet by round (sorted): hookbox %.3f, control %.3f", ratios, controls)
	med, ctl := ratios[len(ratios)/2], controls[len(controls)/2]
	b.ReportMetric(med, "flood/quiet-p99")
	b.ReportMetric(ctl, "control-flood/quiet-p99")
	b.ReportMetric(med/ctl, "hookbox/control")
	b.ReportMetric(float64(quantile(allFlood, 0.99))/float64(quantile(allQuiet, 0.99)), "pooled-flood/quiet-p99")
	b.ReportMetric(float64(quantile(allFlood, 0.99).Microseconds())/1000, "pooled-p99-flood-ms")
	b.ReportMetric(float64(quantile(allQuiet, 0.99).Microseconds())/1000, "pooled-p99-quiet-ms")
	b.ReportMetric(float64(maxKept), "max-rows-kept")
}

// interleavedRound runs one round of BenchmarkRejectedFloodInterleaved
// and returns the good deliveries' latencies in flood windows and in quiet
// ones, and the rejected rows kept; with control, the flood goes to a bare
// server in another process (floodSink) instead of hookbox.
func interleavedRound(b *testing.B, bad int, control bool) (flood, quiet []time.Duration, kept int) {
	url, finish := startFloodService(b, 10)
	floodURL := url
	if control {
		sink, stop := floodSink(b)
		defer stop()
		floodURL = sink
	}
	windows := 2 * bad / (floodRate * int(floodWindow) / int(time.Second))
	good := floodRequests(b, rightSecret, "good", goodRate*windows*int(floodWindow)/int(time.Second))
	// The child needs a moment to start and sign its deliveries.
	start := time.Now().Add(500 * time.Millisecond)
	var floodStatus map[int]int
	var floodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		floodStatus, floodErr = floodFromChild(floodURL, bad, start)
	}()
	due := func(i int) time.Time { return start.Add(time.Duration(i) * time.Second / goodRate) }
	lat, status := scheduled(url, good, floodBody, due)
	wg.Wait()
	if status[http.StatusAccepted] != len(good) {
		b.Fatalf("good deliveries: %v", status)
	}
	if floodErr != nil || floodStatus[http.StatusUnauthorized] != bad {
		b.Fatalf("flood: %v %v", floodStatus, floodErr)
	}
	for i, l := range lat {
		if int(due(i).Sub(start)/floodWindow)%2 == 0 {
			flood = append(flood, l)
		} else {
			quiet = append(quiet, l)
		}
	}
	return flood, quiet, finish()
}
