// Package loadgen drives an HTTP endpoint with many keep-alive connections
// and measures throughput and latency. It is what `hookbox bench` uses.
//
// Requests are signed before the clock starts, and the client writes them
// over raw connections with a hand-built request line, so that as little of
// the machine as possible goes to the load generator itself.
package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one pre-signed delivery: its headers; the body is shared.
type Request struct {
	Header http.Header
	Body   []byte // nil means Options.Body
}

// Options describe one run.
type Options struct {
	URL         string    // full URL to POST to
	Connections int       // concurrent keep-alive connections (default 64)
	Requests    []Request // sent in order, each once (or use Count and Next)
	// Count and Next generate requests on the fly instead of Requests:
	// Next(i) returns the i-th of Count requests. It is called concurrently.
	Count int
	Next  func(i int) Request
	// Duration, if set, stops sending after this long.
	Duration time.Duration
	// Until, if set, stops sending when it is closed (a run meant to last
	// as long as something else does).
	Until <-chan struct{}
	Body  []byte // body for requests that have none of their own
	// Progress, if set, is called about once a second with the requests
	// done so far.
	Progress func(done int, elapsed time.Duration)
}

// Result summarises a run. The rate and the latencies are those of the
// accepted requests (answered 2xx) only: a refusal (a 401 for a wrong
// secret, a 503) is cheap and fast, and counting it would report a
// receiver that stored nothing as a fast one. Failed says how many were
// left out.
type Result struct {
	Requests int           `json:"requests"` // sent: answered or not
	Accepted int           `json:"accepted"` // answered 2xx
	Duration time.Duration `json:"duration_ns"`
	RPS      float64       `json:"rps"` // accepted requests a second
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Status   map[int]int   `json:"status"` // answers by HTTP status
	Errors   int           `json:"errors"` // transport errors (no answer)
}

// Failed is the number of requests not accepted: answered other than 2xx,
// or not answered at all.
func (r Result) Failed() int { return r.Requests - r.Accepted }

// String formats r on one line, ending with the requests not accepted
// when there were any.
func (r Result) String() string {
	s := fmt.Sprintf("%8.0f req/s  p50 %-9v p90 %-9v p99 %-9v max %-9v status %v errors %d",
		r.RPS, r.P50.Round(time.Microsecond), r.P90.Round(time.Microsecond),
		r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.Status, r.Errors)
	if n := r.Failed(); n > 0 {
		s += fmt.Sprintf("  %d of %d not accepted (rate and latencies count the 2xx only)", n, r.Requests)
	}
	return s
}

// Run sends every request once over opts.Connections connections.
func Run(ctx context.Context, opts Options) (Result, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return Result{}, err
	}
	conns := opts.Connections
	if conns <= 0 {
		conns = 64
	}
	n := len(opts.Requests)
	next := func(i int) Request { return opts.Requests[i] }
	if opts.Next != nil {
		n, next = opts.Count, opts.Next
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	if opts.Until != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-opts.Until:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	var seq, done atomic.Int64
	start := time.Now()
	stopProgress := make(chan struct{})
	if opts.Progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					opts.Progress(int(done.Load()), time.Since(start))
				case <-stopProgress:
					return
				}
			}
		}()
	}
	// Each connection keeps its own histogram (of accepted requests) and
	// status counts; they are merged at the end, so memory does not grow
	// with the request count.
	hists := make([]histogram, conns)
	statuses := make([]map[int]int, conns)
	errs := make([]int, conns)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Add(1)
		statuses[w] = map[int]int{}
		go func() {
			defer wg.Done()
			c := clientFor(u)
			defer c.Close()
			for ctx.Err() == nil {
				i := int(seq.Add(1) - 1)
				if i >= n {
					return
				}
				req := next(i)
				body := req.Body
				if body == nil {
					body = opts.Body
				}
				t0 := time.Now()
				code, err := c.Post(req.Header, body)
				took := time.Since(t0)
				if err != nil {
					errs[w]++
				} else {
					statuses[w][code]++
					if code >= 200 && code < 300 {
						hists[w].add(took)
					}
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	elapsed := time.Since(start)

	res := Result{Duration: elapsed, Status: map[int]int{}}
	var all histogram
	for w := range conns {
		all.merge(&hists[w])
		res.Errors += errs[w]
		for code, k := range statuses[w] {
			res.Status[code] += k
		}
	}
	res.Accepted = int(all.count)
	res.Requests = res.Errors
	for _, k := range res.Status {
		res.Requests += k
	}
	err = ctx.Err()
	if opts.Duration > 0 && errors.Is(err, context.DeadlineExceeded) {
		err = nil // the run was meant to end by time
	}
	if opts.Until != nil && err != nil {
		select {
		case <-opts.Until:
			err = nil // the run was meant to end with Until
		default:
		}
	}
	if res.Accepted == 0 {
		return res, err
	}
	res.RPS = float64(res.Accepted) / elapsed.Seconds()
	res.P50, res.P90, res.P99, res.Max = all.quantile(0.50), all.quantile(0.90), all.quantile(0.99), all.max
	return res, err
}

// histogram counts latencies in log-linear buckets: 32 per power of two of
// microseconds, so a quantile is within about 3% of the true value.
type histogram struct {
	buckets [40 * 32]uint32
	count   uint64
	max     time.Duration
}

func bucketOf(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 32 {
		return int(us)
	}
	exp := 63 - bits.LeadingZeros64(us) // us in [2^exp, 2^(exp+1))
	sub := int((us >> (exp - 5)) & 31)
	return min((exp-4)*32+sub, len(histogram{}.buckets)-1)
}

// lowerBound is the smallest latency in bucket b.
func lowerBound(b int) time.Duration {
	if b < 32 {
		return time.Duration(b) * time.Microsecond
	}
	exp, sub := b/32+4, uint64(b%32)
	return time.Duration((32+sub)<<(exp-5)) * time.Microsecond
}

func (h *histogram) add(d time.Duration) {
	h.buckets[bucketOf(d)]++
	h.count++
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.buckets {
		h.buckets[i] += c
	}
	h.count += o.count
	h.max = max(h.max, o.max)
}

func (h *histogram) quantile(q float64) time.Duration {
	rank := uint64(q * float64(h.count))
	var seen uint64
	for b, c := range h.buckets {
		seen += uint64(c)
		if seen > rank {
			return lowerBound(b)
		}
	}
	return h.max
}

// Client is one keep-alive HTTP/1.1 connection to a URL: it writes each
// request with a hand-built request line and redials after an error. It is
// for one goroutine at a time.
type Client struct {
	host, path string
	conn       net.Conn
	r          *bufio.Reader
	buf        []byte
}

// NewClient returns a Client for rawURL; it dials on the first Post.
func NewClient(rawURL string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return clientFor(u), nil
}

func clientFor(u *url.URL) *Client { return &Client{host: u.Host, path: u.RequestURI()} }

// Close closes the connection, if one is open.
func (c *Client) Close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

// Post sends one POST with headers h (and Content-Type application/json)
// and body, and returns the answer's status.
func (c *Client) Post(h http.Header, body []byte) (int, error) {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.host)
		if err != nil {
			return 0, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	b := c.buf[:0]
	b = append(b, "POST "...)
	b = append(b, c.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.host...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	c.buf = b
	if _, err := c.conn.Write(b); err != nil {
		c.reset()
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.reset()
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.reset()
	}
	return resp.StatusCode, nil
}

func (c *Client) reset() {
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn = nil
}
