package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// rawRequest opens a connection to url's host and writes a POST to path
// with the given Content-Length ("" sends it chunked) and header lines, and
// then the first bytes of its body.
func rawRequest(t *testing.T, url, path, length, header, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	framing := "Content-Length: " + length
	if length == "" {
		framing = "Transfer-Encoding: chunked"
		if first != "" {
			first = fmt.Sprintf("%x\r\n%s\r\n", len(first), first)
		}
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n%s%s\r\n\r\n%s", path, header, framing, first); err != nil {
		t.Fatal(err)
	}
	return c
}

// statusOf reads the reply on c and returns its status.
func statusOf(t *testing.T, c net.Conn) int {
	t.Helper()
	return replyOn(t, bufio.NewReader(c))
}

// replyOn reads a whole reply from br and returns its status; br then
// holds what the connection sends after it.
func replyOn(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// githubSource is a source that signs its bodies (GitHub's scheme), so the
// body must be read before anything can tell a sender from an attacker.
func githubSource(t *testing.T) (Source, verify.Config) {
	t.Helper()
	vc := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"body-test-secret"}}
	v, err := verify.New(vc)
	if err != nil {
		t.Fatal(err)
	}
	return Source{Name: "gh", Verifier: v}, vc
}

// signedPost sends a signed delivery to the gh source and returns its
// status.
func signedPost(t *testing.T, url string, vc verify.Config, id string, body []byte) int {
	t.Helper()
	h, err := verify.Sign(vc, body, id, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/gh", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("X-GitHub-Event", "push")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWithheldBodiesHoldLittle is RELIABILITY.md item 13's attack: senders
// with no secret announce bodies of the whole limit to a source that signs
// its bodies, with a well-formed signature, send one byte and withhold the
// rest. When a declared length was taken from the budget before its bytes
// came, two of them held all of it and every other delivery, to any
// source, got 503 until the read timeout. Now each holds its first buffer
// (16 KiB) and a signed delivery beside eight of them is stored.
func TestWithheldBodiesHoldLittle(t *testing.T) {
	src, vc := githubSource(t)
	const limit = 1 << 20
	rec := &recorder{}
	srv := New(Config{Sources: []Source{src}, Ingest: rec.ingest, MaxBodyBytes: limit, MaxInflightBodyBytes: 2 * limit})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close) // after the attackers' connections close

	forged := "X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\nX-GitHub-Delivery: forged\r\nX-GitHub-Event: push\r\n"
	const attackers = 8
	for range attackers {
		rawRequest(t, ts.URL, "/webhooks/gh", fmt.Sprint(limit), forged, "{")
	}
	waitFor(t, "each withheld body to hold its first buffer", func() bool {
		return srv.budget.inUse() == attackers*firstBodyBuffer
	})
	if status := signedPost(t, ts.URL, vc, "real-1", []byte(`{"zen":"beside the withheld bodies"}`)); status != http.StatusAccepted {
		t.Fatalf("signed delivery beside %d withheld bodies: %d, want 202", attackers, status)
	}
	if n := len(rec.stored()); n != 1 {
		t.Fatalf("%d stored, want 1", n)
	}
}

// TestSlowBodyCutOff: a sender that stops sending, or trickles, is answered
// 408 and its connection closed once it falls behind the minimum rate
// after the grace, its budget freed and nothing stored; declared or chunked
// alike. A sender that keeps up the rate is stored, however long it takes
// within the body timeout.
func TestSlowBodyCutOff(t *testing.T) {
	log := &rejections{allow: true}
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, MaxBodyBytes: 100_000, Rejections: log,
		MinBodyRate: 20_000, BodyGrace: 200 * time.Millisecond})

	// A cut-off sender's connection is closed: after a 408 saying what
	// rate is needed, or, when the sender was still writing as it closed,
	// perhaps with a reset that loses the reply (the rejection log below
	// shows each was a 408).
	cutOff := func(t *testing.T, c net.Conn, trickle string) time.Duration {
		t.Helper()
		start := time.Now()
		done := make(chan struct{})
		if trickle != "" {
			go func() { // 2,000 bytes a second: a tenth of the rate
				for {
					select {
					case <-done:
						return
					case <-time.After(50 * time.Millisecond):
						if _, err := c.Write([]byte(trickle)); err != nil {
							return
						}
					}
				}
			}()
		}
		defer close(done)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			reply, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(reply), "at least 20000 bytes a second") {
				t.Fatalf("%d %s, want 408 saying what rate is needed", resp.StatusCode, reply)
			}
			_, err = br.ReadByte()
		}
		if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
			t.Fatalf("connection still open after %v (%v)", time.Since(start), err)
		}
		if trickle == "" && err != io.EOF {
			t.Fatalf("a sender that sent nothing more lost the reply: %v", err)
		}
		return time.Since(start)
	}
	t.Run("stopped", func(t *testing.T) {
		took := cutOff(t, rawRequest(t, b.url, "/webhooks/a", "10000", "X-Id: stopped\r\n", "{\"a\":"), "")
		if took < 150*time.Millisecond {
			t.Errorf("cut off after %v, before the grace of 200ms", took)
		}
	})
	t.Run("trickling", func(t *testing.T) {
		cutOff(t, rawRequest(t, b.url, "/webhooks/a", "100000", "X-Id: trickling\r\n", "{"), strings.Repeat(" ", 100))
	})
	t.Run("chunked trickling", func(t *testing.T) {
		cutOff(t, rawRequest(t, b.url, "/webhooks/a", "", "X-Id: chunked\r\n", "{"), "64\r\n"+strings.Repeat(" ", 100)+"\r\n")
	})
	waitFor(t, "the cut-off bodies' budget to be freed", func() bool { return b.srv.budget.inUse() == 0 })
	if n := len(b.rec.stored()); n != 0 {
		t.Fatalf("%d cut-off deliveries stored, want 0", n)
	}
	log.mu.Lock()
	got := len(log.got)
	for _, r := range log.got {
		if r.Status != http.StatusRequestTimeout || r.BodyComplete {
			t.Errorf("rejection logged as %d (complete %v), want 408 incomplete", r.Status, r.BodyComplete)
		}
	}
	log.mu.Unlock()
	if got != 3 {
		t.Errorf("%d rejections logged, want 3", got)
	}

	// 40,000 bytes at twice the rate, in pieces: about a second, five
	// times the grace, and stored; declared, or as one chunk (net/http's
	// chunked reader reads on to a chunk's end within one read, so a read
	// that asked for a whole 16 KiB buffer outlived the deadline it
	// started under).
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprint("keeping up, chunked ", chunked), func(t *testing.T) {
			length := "40000"
			if chunked {
				length = ""
			}
			c := rawRequest(t, b.url, "/webhooks/a", length, fmt.Sprintf("X-Id: steady-%v\r\n", chunked), "")
			if chunked {
				fmt.Fprintf(c, "%x\r\n", 40000)
			}
			piece := strings.Repeat(" ", 1000)
			for range 40 {
				time.Sleep(25 * time.Millisecond)
				if _, err := c.Write([]byte(piece)); err != nil {
					t.Fatalf("cut off while keeping up the rate: %v", err)
				}
			}
			if chunked {
				io.WriteString(c, "\r\n0\r\n\r\n")
			}
			if status := statusOf(t, c); status != http.StatusAccepted {
				t.Fatalf("a sender keeping up twice the rate: %d, want 202", status)
			}
		})
	}
}

// TestOneClientTakesAtMostHalf: once more than half the body budget is
// held, a client already holding more than its share is refused, so one
// client withholding many bodies leaves the other half to everyone else.
// The withholding client here uses two IPv6 addresses of one /64 (counted
// as one client, as a host is commonly given a /64); the others' addresses
// come from a trusted proxy's X-Forwarded-For. Without the share, the
// withheld bodies take the whole budget and the others get 503.
func TestOneClientTakesAtMostHalf(t *testing.T) {
	const limit, budget = 20_000, 800_000 // a share of 100,000
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, MaxBodyBytes: limit, MaxInflightBodyBytes: budget,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	const each = firstBodyBuffer + limit // what a withheld body of the limit holds
	const conns = 30                     // enough to take the whole budget
	var mu sync.Mutex
	refused := 0
	for i := range conns {
		c := rawRequest(t, b.url, "/webhooks/a", fmt.Sprint(limit),
			fmt.Sprintf("X-Forwarded-For: 2001:db8:0:7::%d\r\nX-Id: withheld-%d\r\n", i%2+1, i), strings.Repeat("w", limit-1))
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // the test's end closed it
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == http.StatusServiceUnavailable {
				refused++
			} else {
				t.Errorf("withheld body answered %d, want 503 or nothing", resp.StatusCode)
			}
		}()
	}
	waitFor(t, "each withheld body to be held whole or refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		used := b.srv.budget.inUse()
		return used%each == 0 && int(used/each)+refused == conns
	})
	held := b.srv.budget.inUse()
	if held > budget/2+each {
		t.Fatalf("one client holds %d of %d bytes, want about half at most", held, budget)
	}
	// Others still get in, up to the rest of the budget.
	for i := range 8 {
		body := strings.Repeat("x", limit)
		status, _, reply := b.post(t, "a", strings.NewReader(body), "X-Id", fmt.Sprint("other-", i), "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		if status != http.StatusAccepted {
			t.Fatalf("another client's delivery %d beside the withheld bodies (%d bytes held): %d %s, want 202", i, held, status, reply)
		}
	}
	t.Logf("the withholding client holds %d of %d bytes (%d of %d bodies refused)", held, budget, refused, conns)
}

// TestClientKey: clients are told apart by address, IPv6 ones by /64.
func TestClientKey(t *testing.T) {
	s := New(Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	key := func(remote, xff string) string {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/a", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		return s.clientKey(r).String()
	}
	for _, c := range []struct{ remote, xff, want string }{
		{"192.0.2.7:5000", "", "192.0.2.7"},
		{"192.0.2.7:5000", "198.51.100.1", "192.0.2.7"}, // not a trusted proxy
		{"10.1.2.3:5000", "198.51.100.1", "198.51.100.1"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.9]:5000", "", "192.0.2.9"},
		{"10.1.2.3:5000", "2001:db8:9:9::1", "2001:db8:9:9::"},
		{"not an address", "", "invalid IP"},
	} {
		if got := key(c.remote, c.xff); got != c.want {
			t.Errorf("%s (X-Forwarded-For %q): %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

// TestUnknownSourceBodyWithheld: a request to an unknown source whose body
// the rejection log reads the start of, and which withholds the rest, is
// answered 404 and closed once its time is up: net/http's read of what is
// left of the body (to reuse the connection) keeps the body's deadline.
func TestUnknownSourceBodyWithheld(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, Rejections: &rejections{allow: true},
		MinBodyRate: 20_000, BodyGrace: 200 * time.Millisecond})
	c := rawRequest(t, b.url, "/webhooks/nope", "1000", "", strings.Repeat("u", 100))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if status := replyOn(t, br); status != http.StatusNotFound {
		t.Fatalf("status %d, want 404", status)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Fatalf("connection not closed after the 404 while the body is withheld: %v %q", err, rest)
	}
}

// TestStatusWriterTakesDeadlines: the writer that records a reply's status
// for tracing lets http.ResponseController reach net/http's own, so that
// with tracing on a body still gets its read deadline.
func TestStatusWriterTakesDeadlines(t *testing.T) {
	errc := make(chan error, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errc <- http.NewResponseController(&statusWriter{ResponseWriter: w}).SetReadDeadline(time.Now().Add(time.Second))
	}))
	defer ts.Close()
	resp, err := http.Post(ts.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-errc; err != nil {
		t.Fatalf("SetReadDeadline through statusWriter: %v", err)
	}
}

// TestBudgetFollowsSourceLimits: the budget's floor and a client's share
// follow the sources' body limits, not a top-level limit no source uses.
func TestBudgetFollowsSourceLimits(t *testing.T) {
	s := New(Config{MaxBodyBytes: 100 << 20, Sources: []Source{{Name: "a", MaxBodyBytes: 1 << 20}}, MaxInflightBodyBytes: 64 << 20})
	if s.budget.limit != 64<<20 || s.budget.share != 8<<20 {
		t.Errorf("budget %d, share %d; want the configured 64 MiB and an eighth of it", s.budget.limit, s.budget.share)
	}
	s = New(Config{Sources: []Source{{Name: "a", MaxBodyBytes: 50 << 20}}, MaxInflightBodyBytes: 64 << 20})
	if want := int64(100<<20 + requestReserve); s.budget.limit != want || s.budget.share != want {
		t.Errorf("budget %d, share %d; want twice the 50 MiB limit and a request's reserve for both", s.budget.limit, s.budget.share)
	}
}

// TestRefusedUnreadClosesSoon: a request refused on its headers alone
// (here a malformed signature header: 401; an unknown source; a path no
// route takes, or one net/http's mux redirects to its clean form) whose
// sender withholds the body is answered at once, and its connection
// closed within a second: net/http's read of the rest of the body after
// the reply no longer waits for the whole read timeout. For the paths
// outside /webhooks/{source} it read the body before writing the reply,
// and so answered nothing until the read timeout (60 s in serve; never,
// here) had passed.
func TestRefusedUnreadClosesSoon(t *testing.T) {
	src, _ := githubSource(t)
	b := setup(t, Config{Sources: []Source{src}})
	for _, path := range []string{"/webhooks/gh", "/webhooks/nope", "/nope", "/healthz", "/webhooks/gh/", "//webhooks/gh", "/webhooks/./gh"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel() // each waits the second it tests for
			c := rawRequest(t, b.url, path, "1000", "X-Hub-Signature-256: sha256=0\r\nX-GitHub-Event: push\r\n", "")
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			status := replyOn(t, br)
			start := time.Now()
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("%d, then the connection: %v after %v, want closed", status, err, time.Since(start))
			}
		})
	}
}

// TestLeftClientGets503: when the request's context ends while the
// delivery is being stored (net/http ends it when the client closes its
// side after sending, or its watch for that fails), the reply is 503, not
// the empty 200 net/http writes for a handler that wrote nothing.
func TestLeftClientGets503(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Sources: []Source{{Name: "a", Verifier: v}},
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			<-ctx.Done() // a commit slower than the client's patience
			return hookbox.Receipt{}, ctx.Err()
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := rawRequest(t, ts.URL, "/webhooks/a", "2", "X-Id: half-closed\r\n", "{}")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if status := statusOf(t, c); status != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: nothing was stored", status)
	}
}

// TestBusyLoggedOnceAMinute: refusals for a spent budget are logged at
// warn once a minute, not once each (a client over its share can send
// many for little).
func TestBusyLoggedOnceAMinute(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, MaxBodyBytes: 20_000, MaxInflightBodyBytes: 40_000 + requestReserve})
	holdBudget(t, b, 4)
	for i := range 5 {
		if status, _, _ := b.post(t, "a", strings.NewReader(strings.Repeat("b", 4000)), "X-Id", fmt.Sprint("busy-", i)); status != http.StatusServiceUnavailable {
			t.Fatalf("delivery %d: %d, want 503", i, status)
		}
	}
	if n := strings.Count(b.log.String(), `"level":"WARN","msg":"delivery refused: body bytes in flight`); n != 1 {
		t.Errorf("%d warn lines for 5 refusals, want 1:\n%s", n, b.log.String())
	}
}

// TestHungStoreGets503: a store that never answers (a disk whose fsync
// hangs) gets its sender a 503 after Config.StoreWait, not a request held
// until the sender gives up.
func TestHungStoreGets503(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{})
	defer close(hung)
	srv := New(Config{Sources: []Source{{Name: "a", Verifier: v}}, StoreWait: 100 * time.Millisecond,
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			select { // a commit that never returns, unless ctx ends
			case <-ctx.Done():
				return hookbox.Receipt{}, ctx.Err()
			case <-hung:
				return hookbox.Receipt{}, errors.New("test over")
			}
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/webhooks/a", strings.NewReader("{}"))
	req.Header.Set("X-Id", "hung-1")
	client := &http.Client{Timeout: 30 * time.Second} // a sender's patience
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("no answer while the store hangs: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
}
