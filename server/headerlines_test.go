package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// tinyHeaderLines returns n header lines of one character's value each,
// "0: x", "1: x", ..., each ending in a line break.
func tinyHeaderLines(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strconv.FormatInt(int64(i), 36))
		b.WriteString(": x\r\n")
	}
	return b.String()
}

// TestManyHeaderLinesRefused: a delivery with more than MaxHeaderLines
// header lines is answered 431 at once, its body unread and the
// connection closed, and nothing of it is ingested. Before, a sender with
// no secret sent a well-formed signature and 64 KiB of headers as some
// 11,000 one-character lines, withheld the body, and each such request
// held about 1.7 MiB of parsed headers for the whole grace before its
// first byte, none of it counted by the budget. One signed delivery with
// MaxHeaderLines lines is stored.
func TestManyHeaderLinesRefused(t *testing.T) {
	src, vc := githubSource(t)
	var ingested atomic.Int64
	srv := New(Config{Sources: []Source{src}, BodyGrace: time.Minute,
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			return hookbox.Receipt{ID: ingested.Add(1)}, nil
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")

	// send writes head (the request line and headers, up to the blank
	// line) and body, and reads the reply within 10 s: well before a
	// minute's grace for a withheld body ends.
	send := func(head, body string) (*http.Response, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte(head + body)); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	body := `{"zen":"ok"}`
	signed, err := verify.Sign(vc, []byte(body), "d1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var sig strings.Builder
	for k, vs := range signed {
		for _, v := range vs {
			sig.WriteString(k + ": " + v + "\r\n")
		}
	}
	fixed := headerLines(signed) + 1 // and Content-Length
	for _, c := range []struct {
		name     string
		lines    int  // tiny lines besides the signature's and Content-Length
		withhold bool // send no body
		want     int
	}{
		{"11,000 lines, body withheld", 11000, true, http.StatusRequestHeaderFieldsTooLarge},
		{"one line too many, body withheld", MaxHeaderLines - fixed + 1, true, http.StatusRequestHeaderFieldsTooLarge},
		{"as many lines as accepted", MaxHeaderLines - fixed, false, http.StatusAccepted},
	} {
		head := "POST /webhooks/gh HTTP/1.1\r\nHost: x\r\n" + sig.String() + tinyHeaderLines(c.lines) +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		sent := body
		if c.withhold {
			sent = ""
		}
		resp, err := send(head, sent)
		if err != nil {
			t.Errorf("%s: %v (no reply while the body was withheld: the request waited for it)", c.name, err)
			continue
		}
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
		if c.want != http.StatusAccepted && !resp.Close {
			t.Errorf("%s: the connection stays open, want it closed with the body unread", c.name)
		}
	}
	if n := ingested.Load(); n != 1 {
		t.Errorf("%d deliveries ingested, want the one with as many lines as accepted", n)
	}
}

// TestHeaderLinesCounted: deliveries waiting for the store, each with
// MaxHeaderLines one-character header lines, hold no more heap than
// twice what the budget counted for them. requestCost counted the
// lines' bytes alone (about 6 each), where each holds about 160 more.
func TestHeaderLinesCounted(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	const budget, n = 4 << 20, 80
	var waiting atomic.Int64
	release := make(chan struct{})
	srv := New(Config{Sources: []Source{{Name: "a", Verifier: v}}, MaxBodyBytes: 16 << 10, MaxInflightBodyBytes: budget,
		StoreWait: time.Hour,
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			waiting.Add(1)
			<-release
			return hookbox.Receipt{ID: 1}, nil
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	defer letGo()
	lines := tinyHeaderLines(MaxHeaderLines - 2) // and X-Id, Content-Length

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var answered atomic.Int64
	for i := range n {
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.Write([]byte("POST /webhooks/a HTTP/1.1\r\nHost: x\r\nX-Id: d" + strconv.Itoa(i) + "\r\n" + lines + "Content-Length: 2\r\n\r\n{}"))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
			}
			answered.Add(1)
		}()
	}
	waitFor(t, "every delivery to wait for the store or be answered", func() bool { return waiting.Load()+answered.Load() == n })
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grown := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	inUse := srv.budget.inUse()
	t.Logf("%d deliveries of %d header lines waiting for the store: budget in use %d KiB, heap grown by %d KiB",
		waiting.Load(), MaxHeaderLines, inUse>>10, grown>>10)
	if grown > 2*inUse {
		t.Errorf("deliveries waiting for the store hold %d KiB of heap, more than twice the %d KiB the budget counted for them", grown>>10, inUse>>10)
	}
}
