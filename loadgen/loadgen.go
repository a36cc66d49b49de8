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
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
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
	Requests    []Request // sent in order, each once
	Body        []byte    // body for requests that have none of their own
	// Progress, if set, is called about once a second with the requests
	// done so far.
	Progress func(done int, elapsed time.Duration)
}

// Result summarises a run.
type Result struct {
	Requests int           `json:"requests"`
	Duration time.Duration `json:"duration_ns"`
	RPS      float64       `json:"rps"`
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Status   map[int]int   `json:"status"` // answers by HTTP status
	Errors   int           `json:"errors"` // transport errors (no answer)
}

// String formats r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%8.0f req/s  p50 %-9v p90 %-9v p99 %-9v max %-9v status %v errors %d",
		r.RPS, r.P50.Round(time.Microsecond), r.P90.Round(time.Microsecond),
		r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.Status, r.Errors)
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
	lat := make([]time.Duration, n)
	status := make([]int, n) // 0: transport error
	var next, done atomic.Int64

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
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &client{host: u.Host, path: u.RequestURI()}
			defer c.close()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				req := &opts.Requests[i]
				body := req.Body
				if body == nil {
					body = opts.Body
				}
				t0 := time.Now()
				code, err := c.post(req.Header, body)
				lat[i] = time.Since(t0)
				if err == nil {
					status[i] = code
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	elapsed := time.Since(start)

	res := Result{Duration: elapsed, Status: map[int]int{}}
	var sent []time.Duration
	for i := range n {
		if lat[i] == 0 && status[i] == 0 {
			continue // never sent (cancelled)
		}
		sent = append(sent, lat[i])
		if status[i] == 0 {
			res.Errors++
		} else {
			res.Status[status[i]]++
		}
	}
	res.Requests = len(sent)
	if res.Requests == 0 {
		return res, ctx.Err()
	}
	slices.Sort(sent)
	pick := func(q float64) time.Duration { return sent[min(len(sent)-1, int(q*float64(len(sent))))] }
	res.RPS = float64(res.Requests) / elapsed.Seconds()
	res.P50, res.P90, res.P99, res.Max = pick(0.50), pick(0.90), pick(0.99), sent[len(sent)-1]
	return res, ctx.Err()
}

// client is one keep-alive HTTP/1.1 connection that redials after an error.
type client struct {
	host, path string
	conn       net.Conn
	r          *bufio.Reader
	buf        []byte
}

func (c *client) close() {
	if c.conn != nil {
		c.conn.Close()
	}
}

func (c *client) post(h http.Header, body []byte) (int, error) {
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

func (c *client) reset() {
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn = nil
}
