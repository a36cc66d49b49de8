package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/verify"
)

// rawRequest is an HTTP/1.1 request written byte by byte, so that paths,
// repeated headers, chunking and pacing are exactly as a test wants them.
type rawRequest struct {
	method string
	target string      // the request-target, sent as is
	header [][2]string // in order; repeats allowed
	body   []byte
	// chunked sends the body with Transfer-Encoding: chunked, in chunks
	// of chunk bytes (default all at once), waiting pace between them.
	chunked bool
	chunk   int
	pace    time.Duration
	// stallAfter > 0 stops writing after that many body bytes and keeps
	// the connection open (Content-Length still announces the whole body).
	stallAfter int
	// headerPace > 0 writes the request line, then one more header line
	// every headerPace, never ending the headers.
	headerPace time.Duration
	// declared > 0 is sent as Content-Length in place of len(body).
	declared int64
}

// rawReply is what came back.
type rawReply struct {
	status  int
	header  http.Header
	body    string
	err     error // no reply: the connection was closed or timed out
	elapsed time.Duration
	wrote   int // body bytes written before the reply or the close
}

// rawDo sends r to addr and reads the reply, giving up after timeout. It
// writes and reads at once, so a reply sent before the body is complete
// (413) is seen as it comes.
func rawDo(addr string, r rawRequest, timeout time.Duration) rawReply {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return rawReply{err: err}
	}
	defer c.Close()
	c.SetDeadline(start.Add(timeout))

	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.method, r.target, addr)
	for _, kv := range r.header {
		fmt.Fprintf(&head, "%s: %s\r\n", kv[0], kv[1])
	}
	if r.chunked {
		head.WriteString("Transfer-Encoding: chunked\r\n")
	} else if r.declared > 0 {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", r.declared)
	} else if r.body != nil || r.method == http.MethodPost {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", len(r.body))
	}
	head.WriteString("\r\n")

	done := make(chan struct{})
	wrote := make(chan int, 1)
	go func() {
		n := 0
		defer func() { wrote <- n }()
		if r.headerPace > 0 {
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.method, r.target, addr)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(r.headerPace):
				}
				if _, err := fmt.Fprintf(c, "X-Slow-%d: x\r\n", i); err != nil {
					return
				}
			}
		}
		if _, err := c.Write(head.Bytes()); err != nil {
			return
		}
		body := r.body
		if r.stallAfter > 0 && r.stallAfter < len(body) {
			body = body[:r.stallAfter]
		}
		size := r.chunk
		if size <= 0 {
			size = max(len(body), 1)
		}
		for len(body) > 0 {
			k := min(size, len(body))
			var err error
			if r.chunked {
				_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", k, body[:k])
			} else {
				_, err = c.Write(body[:k])
			}
			if err != nil {
				return
			}
			n += k
			body = body[k:]
			if r.pace > 0 && len(body) > 0 {
				select {
				case <-done:
					return
				case <-time.After(r.pace):
				}
			}
		}
		if r.stallAfter > 0 {
			<-done
			return
		}
		if r.chunked {
			c.Write([]byte("0\r\n\r\n"))
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	out := rawReply{err: err}
	if err == nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		out.status, out.header, out.body = resp.StatusCode, resp.Header, string(b)
	}
	out.elapsed = time.Since(start)
	close(done)
	c.Close()
	out.wrote = <-wrote
	return out
}

// pairs turns a header into ordered pairs.
func pairs(h http.Header) [][2]string {
	var out [][2]string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// signedHeader signs body for src at now and adds Content-Type.
func signedHeader(t *testing.T, src source, id string, body []byte, now time.Time) http.Header {
	t.Helper()
	h, err := verify.Sign(src.vc, body, id, now)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Content-Type", "application/json")
	return h
}

// with returns a copy of h with key set to values (none: deleted).
func with(h http.Header, key string, values ...string) http.Header {
	out := h.Clone()
	out.Del(key)
	for _, v := range values {
		out.Add(key, v)
	}
	return out
}

// badCase is one abusive request and the status it must get.
type badCase struct {
	name string
	req  rawRequest
	want int
	// full: only in the full run (it waits for a server timeout).
	full bool
	// check, if set, judges the reply further.
	check func(t *testing.T, r rawReply)
	// timeout, if set, is how soon the reply must come (default 90s).
	timeout time.Duration
}

// Sources that only the bad-input table uses, with the YAML keys that
// writeConfig does not write.
var (
	// lockedSrc admits only a network the tests never come from.
	lockedSrc = source{name: "locked", vc: verify.Config{Scheme: "github", Secrets: []string{"faults-locked-secret"}}}
	// lockedNoneSrc checks no signature but admits only that network.
	lockedNoneSrc = source{name: "lockednone", vc: verify.Config{Scheme: "none"}}
	// openSrc checks no signature and admits everyone: a warning at start.
	openSrc = source{name: "open", vc: verify.Config{Scheme: "none", IDHeader: "X-Id"}}

	extraSourceKeys = map[string]string{
		"locked":     `allow_ips: ["192.0.2.0/24", "2001:db8::/32"]`,
		"lockednone": `allow_ips: ["192.0.2.7"]`,
		"open":       `type_header: "X-Type"`,
	}
)

// withSourceKeys adds YAML lines to the named sources of the config at
// path (written by writeConfig) and checks that it still loads.
func withSourceKeys(t *testing.T, path string, keys map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		out.WriteString(line)
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- name: "); ok {
			if n, err := strconv.Unquote(name); err == nil && keys[n] != "" {
				fmt.Fprintf(&out, "    %s\n", keys[n])
			}
		}
	}
	if _, err := config.Parse([]byte(out.String())); err != nil {
		t.Fatalf("config does not load: %v\n%s", err, out.String())
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput sends abusive and malformed requests to a running hookbox
// serve over real HTTP: each gets its documented status (400, 401, 403,
// 404, 405, 413, 431 for huge headers) and nothing is stored. What the
// headers alone condemn (a missing or malformed signature, a stale or
// future timestamp, a declared length over the limit, an address outside
// allow_ips) is answered while the body is still withheld. Slow clients: a
// body trickling past a small limit is refused with 413 before it ends;
// in the full run, a slow-header connection is closed by the server's
// ReadHeaderTimeout (10s) and a stalled body by its ReadTimeout (60s).
// The log warns at start about the source that checks no signature and
// admits everyone, and about no other.
func TestBadInput(t *testing.T) {
	needBinary(t)
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		srcs := []source{polarSrc, stripeSrc, githubSrc, shopSrc, smallSrc, lockedSrc, lockedNoneSrc, openSrc}
		cfgPath := writeConfig(t, dir, serverSpec{db: dbURL, sources: srcs})
		withSourceKeys(t, cfgPath, extraSourceKeys)
		srv := newServer(t, dir, cfgPath)
		p := srv.start()
		st := openStore(t, dbURL)

		cases := badCases(t)
		t.Run("cases", func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if c.full && !*fullRun {
						t.Skip("waits for a server timeout; runs with -faults.full")
					}
					if c.req.pace > 0 || c.req.stallAfter > 0 || c.req.headerPace > 0 {
						t.Parallel()
					}
					timeout := 90 * time.Second
					if c.timeout > 0 {
						timeout = c.timeout
					}
					r := rawDo(p.Addr(), c.req, timeout)
					if c.check != nil {
						c.check(t, r)
						return
					}
					if r.err != nil {
						t.Fatalf("no reply (%v) after %s, want %d", r.err, r.elapsed, c.want)
					}
					if r.status != c.want {
						t.Errorf("status %d %q, want %d", r.status, r.body, c.want)
					}
					checkErrorReply(t, r)
				})
			}
		})
		if n := countStatus(t, st, ""); n != 0 {
			evs, _ := st.Events(context.Background(), hookbox.Filter{Limit: 10})
			for _, e := range evs {
				t.Logf("stored: %s %q", e.Source, e.DeliveryID)
			}
			t.Errorf("bad input stored %d rows, want 0", n)
		}
		// The control: a good delivery is stored, so the count above
		// looked at the right table.
		body := []byte(`{"type":"control"}`)
		r := rawDo(p.Addr(), rawRequest{method: "POST", target: "/webhooks/polar",
			header: pairs(signedHeader(t, polarSrc, "msg_control", body, time.Now())), body: body}, 10*time.Second)
		if r.status != http.StatusAccepted {
			t.Errorf("control delivery: %d %q %v", r.status, r.body, r.err)
		}
		if n := countStatus(t, st, ""); n != 1 {
			t.Errorf("after the control delivery %d rows, want 1", n)
		}
		srv.stop()
		checkNoneWarnings(t, p.LogTail(1<<20))
	})
}

// checkNoneWarnings: before it listens, the log warns, naming it, about
// the none source that admits every address, and about no other source.
func checkNoneWarnings(t *testing.T, log string) {
	t.Helper()
	var warned []string
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Level  string `json:"level"`
			Msg    string `json:"msg"`
			Source string `json:"source"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec.Msg == "listening" {
			break
		}
		if rec.Level == "WARN" && rec.Source != "" {
			warned = append(warned, rec.Source)
		}
	}
	if len(warned) != 1 || warned[0] != "open" {
		t.Errorf("WARN log lines name the sources %q, want only [\"open\"]", warned)
	}
}

// secrets are every configured secret, none of which may appear in a reply.
func secrets() []string {
	var out []string
	for _, s := range []source{polarSrc, stripeSrc, githubSrc, shopSrc, smallSrc, lockedSrc} {
		out = append(out, s.vc.Secrets...)
	}
	return out
}

// checkErrorReply: an error reply says what is wrong, as JSON, without a
// secret; 405 names the allowed method.
func checkErrorReply(t *testing.T, r rawReply) {
	t.Helper()
	for _, s := range secrets() {
		if strings.Contains(r.body, s) {
			t.Errorf("reply leaks a secret: %q", r.body)
		}
	}
	switch {
	case r.status == http.StatusRequestHeaderFieldsTooLarge:
		return // written by net/http before any handler runs
	case r.status >= 400 && r.status < 500:
		if !strings.Contains(r.body, `"error"`) {
			t.Errorf("error reply is not the JSON error object: %q", r.body)
		}
	}
	if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") != http.MethodPost {
		t.Errorf("405 with Allow %q, want POST", r.header.Get("Allow"))
	}
}

func badCases(t *testing.T) []badCase {
	now := time.Now()
	post := func(target string, h http.Header, body []byte) rawRequest {
		return rawRequest{method: "POST", target: target, header: pairs(h), body: body}
	}
	var cases []badCase
	add := func(name string, want int, req rawRequest) {
		cases = append(cases, badCase{name: name, req: req, want: want})
	}
	body := []byte(`{"id":"evt_bad_1","type":"order.paid","data":{"n":1}}`)
	sig := map[string]http.Header{}
	for _, s := range []source{polarSrc, stripeSrc, githubSrc, shopSrc} {
		sig[s.name] = signedHeader(t, s, "bad-1", body, now)
	}
	sigHeader := map[string]string{
		"polar": "Webhook-Signature", "stripe": "Stripe-Signature",
		"github": "X-Hub-Signature-256", "shop": "X-Shopify-Hmac-Sha256",
	}

	// Bodies over the limit, signed correctly: the size alone decides.
	big := bytes.Repeat([]byte("x"), int(smallSrc.maxBody)+1)
	add("over limit, Content-Length", 413, post("/webhooks/small", signedHeader(t, smallSrc, "big-1", big, now), big))
	chunked := post("/webhooks/small", signedHeader(t, smallSrc, "big-2", big, now), big)
	chunked.chunked, chunked.chunk = true, 100
	add("over limit, chunked", 413, chunked)
	huge := bytes.Repeat([]byte("y"), 1<<20+1)
	add("over the 1 MiB default, Content-Length", 413, post("/webhooks/polar", signedHeader(t, polarSrc, "big-3", huge, now), huge))
	hugeChunked := post("/webhooks/polar", signedHeader(t, polarSrc, "big-4", huge, now), huge)
	hugeChunked.chunked, hugeChunked.chunk = true, 32<<10
	add("over the 1 MiB default, chunked", 413, hugeChunked)

	// A body trickling in past a small limit is refused as soon as it
	// crosses it, not when it ends (40 chunks of 32 bytes, 100ms apart:
	// the limit of 256 falls in the ninth).
	slow := bytes.Repeat([]byte("z"), 40*32)
	slowReq := post("/webhooks/small", signedHeader(t, smallSrc, "slow-1", slow, now), slow)
	slowReq.chunked, slowReq.chunk, slowReq.pace = true, 32, 100*time.Millisecond
	cases = append(cases, badCase{name: "slow body past a small limit", req: slowReq, want: 413,
		check: func(t *testing.T, r rawReply) {
			if r.status != 413 {
				t.Fatalf("status %d %v, want 413", r.status, r.err)
			}
			if r.wrote >= len(slow) {
				t.Errorf("413 came only after the whole body (%d bytes, %s)", r.wrote, r.elapsed)
			}
			t.Logf("413 after %d bytes, %s", r.wrote, r.elapsed.Round(time.Millisecond))
		}})

	// Slow clients the server's own timeouts must cut (full run only).
	cases = append(cases, badCase{name: "slow headers", full: true,
		req: rawRequest{method: "POST", target: "/webhooks/polar", headerPace: 500 * time.Millisecond},
		check: func(t *testing.T, r rawReply) {
			// The server closes without a reply after ReadHeaderTimeout.
			if r.err == nil {
				t.Errorf("got %d %q to a request whose headers never ended", r.status, r.body)
			}
			if r.elapsed < 9*time.Second || r.elapsed > 15*time.Second {
				t.Errorf("connection closed after %s, want ReadHeaderTimeout (10s)", r.elapsed)
			}
			t.Logf("closed after %s (%v)", r.elapsed.Round(time.Millisecond), r.err)
		}})
	stalled := post("/webhooks/polar", signedHeader(t, polarSrc, "stall-1", body, now), body)
	stalled.stallAfter = len(body) / 2
	cases = append(cases, badCase{name: "stalled body", full: true, req: stalled,
		check: func(t *testing.T, r rawReply) {
			// The minimum body rate ends the body read once its grace
			// (5 s) has passed: 408. Never a 202.
			if r.status != http.StatusRequestTimeout {
				t.Fatalf("status %d %v, want 408", r.status, r.err)
			}
			if r.elapsed < 4*time.Second || r.elapsed > 10*time.Second {
				t.Errorf("ended after %s, want the body grace (5s)", r.elapsed)
			}
			t.Logf("ended after %s: status %d %v", r.elapsed.Round(time.Millisecond), r.status, r.err)
		}})

	// Huge headers: net/http's MaxHeaderBytes (64 KiB) answers 431.
	add("one header of 80 KiB", 431, post("/webhooks/polar", with(sig["polar"], "X-Pad", strings.Repeat("a", 80<<10)), body))
	many := sig["polar"].Clone()
	for i := range 100 {
		many.Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("b", 1<<10))
	}
	add("100 headers of 1 KiB", 431, post("/webhooks/polar", many, body))

	// Signature headers, scheme by scheme.
	forged := map[string]string{
		"polar":  "v1," + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		"stripe": fmt.Sprintf("t=%d,v1=%s", now.Unix(), strings.Repeat("ab", 32)),
		"github": "sha256=" + strings.Repeat("cd", 32),
		"shop":   base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)),
	}
	for _, name := range []string{"polar", "stripe", "github", "shop"} {
		h := sigHeader[name]
		valid := sig[name].Get(h)
		target := "/webhooks/" + name
		add(name+": signature missing", 401, post(target, with(sig[name], h), body))
		add(name+": signature forged", 401, post(target, with(sig[name], h, forged[name]), body))
		add(name+": two forged signature headers", 401, post(target, with(sig[name], h, forged[name], forged[name]), body))
		// A signature header sent on two lines is refused, whichever
		// line holds the valid signature.
		add(name+": forged signature header, then the valid one", 401, post(target, with(sig[name], h, forged[name], valid), body))
		add(name+": valid signature header, then a forged one", 401, post(target, with(sig[name], h, valid, forged[name]), body))
		tampered := append([]byte(nil), body...)
		tampered[len(tampered)-3] = '2'
		add(name+": body changed after signing", 401, post(target, sig[name], tampered))
		for _, m := range malformedSignatures(name, valid, now) {
			add(name+": malformed signature, "+m[0], 401, post(target, with(sig[name], h, m[1]), body))
		}
	}

	// Wrong secret, scheme by scheme.
	for _, s := range []source{polarSrc, stripeSrc, githubSrc, shopSrc} {
		wrong := s
		wrong.vc.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("not-the-secret-"+s.name))}
		add(s.name+": wrong secret", 401, post("/webhooks/"+s.name, signedHeader(t, wrong, "bad-1", body, now), body))
	}

	// Timestamps: stale, future, and a valid signature replayed under a
	// new timestamp.
	for _, s := range []source{polarSrc, stripeSrc} {
		add(s.name+": timestamp 6 minutes old", 401, post("/webhooks/"+s.name, signedHeader(t, s, "bad-old", body, now.Add(-6*time.Minute)), body))
		add(s.name+": timestamp 6 minutes ahead", 401, post("/webhooks/"+s.name, signedHeader(t, s, "bad-future", body, now.Add(6*time.Minute)), body))
	}
	old := signedHeader(t, polarSrc, "bad-replay", body, now.Add(-2*time.Minute))
	add("polar: signature replayed with a new timestamp", 401,
		post("/webhooks/polar", with(old, "Webhook-Timestamp", strconv.FormatInt(now.Unix(), 10)), body))
	oldStripe := signedHeader(t, stripeSrc, "", body, now.Add(-2*time.Minute)).Get("Stripe-Signature")
	_, v1, _ := strings.Cut(oldStripe, ",")
	add("stripe: signature replayed with a new timestamp", 401,
		post("/webhooks/stripe", with(sig["stripe"], "Stripe-Signature", fmt.Sprintf("t=%d,%s", now.Unix(), v1)), body))

	// Authenticated, but no delivery id: 400.
	for _, b := range []string{`not json`, `{"type":"invoice.paid"}`, `{"id":123}`, `{"id":""}`, `[{"id":"evt_1"}]`, ``} {
		sb := []byte(b)
		add(fmt.Sprintf("stripe: body %q has no id", b), 400, post("/webhooks/stripe", signedHeader(t, stripeSrc, "", sb, now), sb))
	}
	add("github: no X-GitHub-Delivery", 400, post("/webhooks/github", with(sig["github"], "X-GitHub-Delivery"), body))
	add("shop: no id header", 400, post("/webhooks/shop", with(sig["shop"], "X-Shopify-Webhook-Id"), body))

	// Ids and event types longer than hookbox.MaxIDLength: 400, whether
	// from a header, the body or a none source.
	long := strings.Repeat("i", hookbox.MaxIDLength+1)
	add("polar: webhook-id of 401 bytes", 400, post("/webhooks/polar", signedHeader(t, polarSrc, long, body, now), body))
	huge6K := strings.Repeat("k", 6<<10)
	add("polar: webhook-id of 6 KiB", 400, post("/webhooks/polar", signedHeader(t, polarSrc, huge6K, body, now), body))
	longType := []byte(`{"id":"evt_long_type","type":"` + long + `"}`)
	add("polar: event type of 401 bytes", 400, post("/webhooks/polar", signedHeader(t, polarSrc, "long-type", longType, now), longType))
	longID := []byte(`{"id":"` + long + `","type":"order.paid"}`)
	add("stripe: body id of 401 bytes", 400, post("/webhooks/stripe", signedHeader(t, stripeSrc, "", longID, now), longID))
	add("github: X-GitHub-Delivery of 401 bytes", 400, post("/webhooks/github", with(sig["github"], "X-GitHub-Delivery", long), body))
	add("github: X-GitHub-Event of 401 bytes", 400, post("/webhooks/github", with(sig["github"], "X-GitHub-Event", long), body))
	add("open: id header of 401 bytes", 400, post("/webhooks/open", http.Header{"X-Id": {long}}, body))
	add("open: type header of 401 bytes", 400, post("/webhooks/open", http.Header{"X-Id": {"open-1"}, "X-Type": {long}}, body))

	// Lengths: a body longer than its Content-Length is cut there (the
	// signature covers the whole), and a declared length over the limit is
	// refused before a byte of the body is read.
	longer := post("/webhooks/polar", sig["polar"], body)
	longer.declared = int64(len(body) - 5)
	add("body larger than declared", 401, longer)
	overDeclared := post("/webhooks/small", signedHeader(t, smallSrc, "declared-1", body, now), body)
	overDeclared.declared, overDeclared.stallAfter = smallSrc.maxBody+1, 1
	cases = append(cases, badCase{name: "declared length over the limit, body withheld", req: overDeclared, want: 413, timeout: 10 * time.Second})
	gib := post("/webhooks/polar", sig["polar"], body)
	gib.declared, gib.stallAfter = 1<<30, 1
	cases = append(cases, badCase{name: "declared 1 GiB, body withheld", req: gib, want: 413, timeout: 10 * time.Second})

	// What the headers condemn is answered while the body is withheld:
	// the server does not wait for (or buffer) an unauthenticated body.
	// The body is over net/http's 256 KiB drain, as an attack's would be.
	withheld := func(name string, want int, target string, h http.Header) {
		big := bytes.Repeat([]byte("w"), 512<<10)
		req := post(target, h, big)
		req.stallAfter = 1
		cases = append(cases, badCase{name: name + ", body withheld", req: req, want: want, timeout: 10 * time.Second})
	}
	for _, name := range []string{"polar", "stripe", "github", "shop"} {
		h := sigHeader[name]
		withheld(name+": signature missing", 401, "/webhooks/"+name, with(sig[name], h))
		withheld(name+": signature malformed", 401, "/webhooks/"+name, with(sig[name], h, "x"+sig[name].Get(h)))
	}
	for _, s := range []source{polarSrc, stripeSrc} {
		withheld(s.name+": timestamp 6 minutes old", 401, "/webhooks/"+s.name, signedHeader(t, s, "old-withheld", body, now.Add(-6*time.Minute)))
		withheld(s.name+": timestamp 6 minutes ahead", 401, "/webhooks/"+s.name, signedHeader(t, s, "ahead-withheld", body, now.Add(6*time.Minute)))
	}

	// allow_ips: a request from elsewhere gets 403, signed or not, and
	// forwarded-for headers count only from trusted_proxies (none here).
	lockedSig := signedHeader(t, lockedSrc, "locked-1", body, now)
	add("locked: disallowed IP, signed correctly", 403, post("/webhooks/locked", lockedSig, body))
	add("locked: disallowed IP, X-Forwarded-For naming an allowed one", 403,
		post("/webhooks/locked", with(lockedSig, "X-Forwarded-For", "192.0.2.7"), body))
	add("locked: disallowed IP, Forwarded naming an allowed one", 403,
		post("/webhooks/locked", with(lockedSig, "Forwarded", "for=192.0.2.7"), body))
	add("lockednone: disallowed IP, no signature needed", 403, post("/webhooks/lockednone", http.Header{"X-Forwarded-For": {"192.0.2.7"}}, body))
	withheld("lockednone: disallowed IP", 403, "/webhooks/lockednone", http.Header{})

	// Routing: unknown source, wrong method, path tricks (each request
	// otherwise a valid polar delivery).
	add("unknown source", 404, post("/webhooks/nope", sig["polar"], body))
	for _, m := range []string{"GET", "PUT", "PATCH", "DELETE"} {
		req := post("/webhooks/polar", sig["polar"], body)
		req.method = m
		add("method "+m, 405, req)
	}
	for _, target := range []string{
		"/webhooks/a/b", "/webhooks/polar/", "/webhooks/polar%2F", "/webhooks/polar%2Fx", "/webhooks%2Fpolar",
		"/webhooks/", "/webhooks", "/WEBHOOKS/polar", "/admin/events",
	} {
		add("path "+target, 404, post(target, sig["polar"], body))
	}
	// Paths that are not clean: net/http's mux answers a redirect to the
	// clean path (or 404) and runs no handler.
	for _, target := range []string{"/webhooks/../admin", "/webhooks/../webhooks/polar", "/webhooks/./polar", "//webhooks/polar", "/x/../webhooks/polar", "/webhooks/x/..%2Fpolar"} {
		cases = append(cases, badCase{name: "path " + target, req: post(target, sig["polar"], body),
			check: func(t *testing.T, r rawReply) {
				switch {
				case r.err != nil:
					t.Fatalf("no reply: %v", r.err)
				case r.status == http.StatusNotFound:
				case r.status == http.StatusMovedPermanently || r.status == http.StatusTemporaryRedirect || r.status == http.StatusPermanentRedirect:
					t.Logf("%d to %s", r.status, r.header.Get("Location"))
					if loc := r.header.Get("Location"); strings.Contains(loc, "..") || strings.Contains(loc, "//") || strings.Contains(loc, "/./") {
						t.Errorf("redirect to an unclean path %q", loc)
					}
				default:
					t.Errorf("status %d %q, want 404 or a redirect to the clean path", r.status, r.body)
				}
			}})
	}
	return cases
}

// malformedSignatures are values of name's signature header that no
// verifier may accept, by label.
func malformedSignatures(name, valid string, now time.Time) [][2]string {
	ts := strconv.FormatInt(now.Unix(), 10)
	hexSig := strings.Repeat("0f", 32)
	switch name {
	case "polar":
		b64 := strings.TrimPrefix(valid, "v1,")
		return [][2]string{
			{"empty", ""}, {"version only", "v1"}, {"version and comma", "v1,"}, {"not base64", "v1,!!!!"},
			{"truncated", "v1," + b64[:20]}, {"version v2", "v2," + b64}, {"version v1a", "v1a," + b64},
			{"space for comma", "v1 " + b64}, {"lower-cased", "v1," + strings.ToLower(b64)},
			{"too long", "v1," + b64 + "AA"}, {"200 junk entries", strings.Repeat("v1,x ", 200)},
		}
	case "stripe":
		_, v1, _ := strings.Cut(valid, ",")
		return [][2]string{
			{"empty", ""}, {"no key=value", "garbage"}, {"empty t", "t=,v1=" + hexSig}, {"t not a number", "t=abc," + v1},
			{"no t", v1}, {"no v1", "t=" + ts}, {"v1 not hex", "t=" + ts + ",v1=" + strings.Repeat("zz", 32)},
			{"two t", "t=" + ts + ",t=" + ts + "," + v1}, {"negative t", "t=-" + ts + "," + v1},
			{"only v0", "t=" + ts + ",v0=" + hexSig}, {"v1 truncated", "t=" + ts + ",v1=" + hexSig[:62]},
		}
	case "github":
		h := strings.TrimPrefix(valid, "sha256=")
		return [][2]string{
			{"empty", ""}, {"prefix only", "sha256="}, {"sha1", "sha1=" + h[:40]}, {"truncated", "sha256=" + h[:63]},
			{"too long", "sha256=" + h + "0"}, {"not hex", "sha256=" + strings.Repeat("g", 64)}, {"no prefix", h},
			{"upper-case prefix", "SHA256=" + h}, {"space in prefix", "sha256 =" + h},
			{"bad hex at the end", "sha256=" + h[:62] + "zz"},
		}
	case "shop":
		raw, _ := base64.StdEncoding.DecodeString(valid)
		return [][2]string{
			{"empty", ""}, {"padding only", "="}, {"hex instead of base64", hex.EncodeToString(raw)},
			{"truncated", valid[:20]}, {"too long", valid + "AAAA"}, {"not base64", "!" + valid[1:]},
			{"URL alphabet", base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))},
		}
	}
	return nil
}
