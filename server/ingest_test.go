package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/verify"
)

// recorder is an IngestFunc that keeps what it is given.
type recorder struct {
	mu sync.Mutex
	ds []hookbox.Delivery
}

func (rec *recorder) ingest(_ context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ds = append(rec.ds, d)
	return hookbox.Receipt{ID: int64(len(rec.ds))}, nil
}

func (rec *recorder) stored() []hookbox.Delivery {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hookbox.Delivery(nil), rec.ds...)
}

// bundle is one server on a real port.
type bundle struct {
	srv *Server
	url string
	rec *recorder
	log *syncbuf.Buffer
}

// setup serves cfg (its sources use the none scheme with X-Id and X-Type
// headers unless they bring a verifier) on 127.0.0.1, port 0.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	rec := &recorder{}
	logs := &syncbuf.Buffer{}
	for i := range cfg.Sources {
		if cfg.Sources[i].Verifier == nil {
			v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id", TypeHeader: "X-Type"})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Sources[i].Verifier = v
		}
	}
	cfg.Ingest = rec.ingest
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})) // the per-delivery line is at debug
	srv := New(cfg)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &bundle{srv: srv, url: hs.URL, rec: rec, log: logs}
}

// post sends body to source with the given headers (pairs).
func (b *bundle) post(t *testing.T, source string, body io.Reader, kv ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+"/webhooks/"+source, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(reply)
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestInflightBudget: while deliveries hold most of the budget for body
// bytes in flight, another that does not fit gets 503 with Retry-After and
// is not stored; once they are answered or gone their bytes are free again.
func TestInflightBudget(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, MaxBodyBytes: 20_000, MaxInflightBodyBytes: 40_000 + requestReserve})
	held := holdBudget(t, b, 4)

	status, h, reply := b.post(t, "a", strings.NewReader(strings.Repeat("b", 4000)), "X-Id", "second")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("second delivery over the budget: %d (Retry-After %q) %s, want 503 with Retry-After", status, h.Get("Retry-After"), reply)
	}
	// Undeclared length: refused as soon as it would pass the budget.
	status, _, _ = b.post(t, "a", io.MultiReader(strings.NewReader(strings.Repeat("c", 4000))), "X-Id", "third")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("chunked delivery over the budget: %d, want 503", status)
	}
	if n := len(b.rec.stored()); n != 0 {
		t.Fatalf("%d deliveries stored while the first are unfinished, want 0", n)
	}

	// Three holders leave; the first finishes its body, which now fits
	// with what the delivery holds besides it.
	held[1].Close()
	held[2].Close()
	held[3].Close()
	waitFor(t, "the budget of the holders that left to be free", func() bool { return b.srv.budget.inUse() == firstBodyBuffer+20_000 })
	held[0].Write([]byte("a"))
	if status := statusOf(t, held[0]); status != http.StatusAccepted {
		t.Fatalf("first delivery: %d, want 202", status)
	}
	waitFor(t, "the budget to be free", func() bool { return b.srv.budget.inUse() == 0 })
	if status, _, reply := b.post(t, "a", strings.NewReader(strings.Repeat("d", 4000)), "X-Id", "fourth"); status != http.StatusAccepted {
		t.Fatalf("delivery after the first was answered: %d %s, want 202", status, reply)
	}
	if got := len(b.rec.stored()); got != 2 {
		t.Fatalf("%d deliveries stored, want 2 (holder-0, fourth)", got)
	}
}

// holdBudget opens n deliveries to source a, each announcing 20,000 bytes
// and sending 19,999, and waits until each holds its buffers (a first of
// 16 KiB, then one of its whole length): with a budget of 40,000 bytes and
// requestReserve, the floor for a limit of 20,000, four leave less than a
// small delivery's body and requestOverhead. Writing the last byte on a
// connection finishes its delivery, once the budget has room for its
// requestCost.
func holdBudget(t *testing.T, b *bundle, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for i := range n {
		cs = append(cs, rawRequest(t, b.url, "/webhooks/a", "20000", fmt.Sprintf("X-Id: holder-%d\r\n", i), strings.Repeat("h", 19_999)))
		waitFor(t, "the holders' bodies to hold their buffers", func() bool { return b.srv.budget.inUse() == int64(i+1)*(firstBodyBuffer+20_000) })
	}
	return cs
}

// TestBodyBuffer: a declared body is read into a buffer of exactly its
// length; an undeclared one never grows past the source's limit.
func TestBodyBuffer(t *testing.T) {
	const limit = 100_000
	b := setup(t, Config{Sources: []Source{{Name: "a"}}, MaxBodyBytes: limit})
	body := strings.Repeat("x", 70_000)
	if status, _, reply := b.post(t, "a", strings.NewReader(body), "X-Id", "declared"); status != http.StatusAccepted {
		t.Fatalf("declared: %d %s", status, reply)
	}
	// A reader of unknown length makes the client send it chunked.
	if status, _, reply := b.post(t, "a", io.MultiReader(strings.NewReader(body)), "X-Id", "chunked"); status != http.StatusAccepted {
		t.Fatalf("chunked: %d %s", status, reply)
	}
	ds := b.rec.stored()
	if len(ds) != 2 {
		t.Fatalf("%d stored, want 2", len(ds))
	}
	if p := ds[0].Payload; string(p) != body || cap(p) != len(body) {
		t.Errorf("declared body: %d bytes in a buffer of %d, want exactly %d", len(p), cap(p), len(body))
	}
	if p := ds[1].Payload; string(p) != body || cap(p) > limit {
		t.Errorf("chunked body: %d bytes in a buffer of %d, want at most the limit %d", len(p), cap(p), limit)
	}
	if used := b.srv.budget.inUse(); used != 0 {
		t.Errorf("%d bytes still counted in flight after the replies", used)
	}
	// Exactly the limit, undeclared, is accepted; one more byte is not.
	full := strings.Repeat("y", limit)
	if status, _, reply := b.post(t, "a", io.MultiReader(strings.NewReader(full)), "X-Id", "full"); status != http.StatusAccepted {
		t.Errorf("chunked body of exactly the limit: %d %s", status, reply)
	}
	if status, _, _ := b.post(t, "a", io.MultiReader(strings.NewReader(full+"z")), "X-Id", "over"); status != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body one byte over the limit: %d, want 413", status)
	}
}

// TestIDLength: ids and event types of hookbox.MaxIDLength bytes are
// stored, one byte more is a 400 that stores nothing, and the log shows
// only the start of a long id.
func TestIDLength(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}})
	longest := strings.Repeat("i", hookbox.MaxIDLength)
	if status, _, reply := b.post(t, "a", strings.NewReader("{}"), "X-Id", longest, "X-Type", longest); status != http.StatusAccepted {
		t.Fatalf("id and type of %d bytes: %d %s, want 202", hookbox.MaxIDLength, status, reply)
	}
	for _, h := range [][]string{
		{"X-Id", longest + "i"},
		{"X-Id", "ok", "X-Type", longest + "t"},
		{"X-Id", strings.Repeat("é", hookbox.MaxIDLength/2+1)},
	} {
		status, _, reply := b.post(t, "a", strings.NewReader("{}"), h...)
		if status != http.StatusBadRequest || !strings.Contains(reply, "longer than 400 bytes") {
			t.Errorf("%s of %d bytes: %d %s, want 400 saying it is longer than 400 bytes", h[len(h)-2], len(h[len(h)-1]), status, reply)
		}
	}
	if n := len(b.rec.stored()); n != 1 {
		t.Errorf("%d stored, want 1", n)
	}
	if strings.Contains(b.log.String(), longest) {
		t.Errorf("the log holds a %d-byte id in full:\n%s", len(longest), b.log.String())
	}
	if !strings.Contains(b.log.String(), "(400 bytes)") {
		t.Errorf("the log does not say how long the cut id was:\n%s", b.log.String())
	}
}

// TestAllowIPs: allow_ips is judged on the peer's address, or on what a
// trusted proxy's forwarding headers say; a refusal is 403 and stores
// nothing.
func TestAllowIPs(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	local := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	behindProxy := setup(t, Config{
		Sources:        []Source{{Name: "a", AllowIPs: allow}, {Name: "local", AllowIPs: local}, {Name: "open"}},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")},
	})
	direct := setup(t, Config{Sources: []Source{{Name: "a", AllowIPs: allow}, {Name: "local", AllowIPs: local}}})
	cases := []struct {
		b      *bundle
		source string
		header []string
		want   int
	}{
		{direct, "local", nil, 202},
		{direct, "a", nil, 403},
		{direct, "a", []string{"X-Forwarded-For", "192.0.2.7"}, 403},
		{direct, "a", []string{"Forwarded", "for=192.0.2.7"}, 403},
		{behindProxy, "open", nil, 202},
		{behindProxy, "a", nil, 403}, // the proxy itself is not allowed
		{behindProxy, "local", nil, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7"}, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7:4711"}, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "198.51.100.1"}, 403},
		{behindProxy, "local", []string{"X-Forwarded-For", "198.51.100.1"}, 403},
		// The nearest untrusted hop is the client, whatever came before.
		{behindProxy, "a", []string{"X-Forwarded-For", "198.51.100.1, 192.0.2.7"}, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7, 198.51.100.1"}, 403},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7, 10.1.2.3"}, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7", "X-Forwarded-For", "198.51.100.1"}, 403},
		{behindProxy, "a", []string{"X-Forwarded-For", "unknown"}, 403},
		{behindProxy, "a", []string{"X-Forwarded-For", ""}, 403},
		{behindProxy, "a", []string{"Forwarded", "for=192.0.2.7;proto=https"}, 202},
		{behindProxy, "a", []string{"Forwarded", `For="[2001:db8::1]:4711"`}, 202},
		{behindProxy, "a", []string{"Forwarded", "for=198.51.100.1, for=10.0.0.2"}, 403},
		{behindProxy, "a", []string{"Forwarded", "for=_hidden"}, 403},
		{behindProxy, "a", []string{"Forwarded", "proto=https"}, 403},
		// Both headers: they must name the same client.
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7", "Forwarded", "for=192.0.2.7"}, 202},
		{behindProxy, "a", []string{"X-Forwarded-For", "198.51.100.1", "Forwarded", "for=192.0.2.7"}, 403},
		{behindProxy, "a", []string{"X-Forwarded-For", "192.0.2.7", "Forwarded", "for=198.51.100.1"}, 403},
	}
	stored := map[*bundle]int{}
	for i, c := range cases {
		kv := append([]string{"X-Id", fmt.Sprint("d", i)}, c.header...)
		status, _, reply := c.b.post(t, c.source, strings.NewReader("{}"), kv...)
		if status != c.want {
			t.Errorf("%s, %q via %s: %d %s, want %d", c.source, c.header, map[bool]string{true: "proxy", false: "direct"}[c.b == behindProxy], status, reply, c.want)
		}
		if c.want == 202 {
			stored[c.b]++
		}
	}
	for _, b := range []*bundle{direct, behindProxy} {
		if got := len(b.rec.stored()); got != stored[b] {
			t.Errorf("%d stored, want %d", got, stored[b])
		}
	}
}

// TestKeptHeaderDropsConnectionNamed: headers the sender names in
// Connection are not stored (and so never forwarded), nor is Connection.
func TestKeptHeaderDropsConnectionNamed(t *testing.T) {
	h := http.Header{
		"Connection":      {"keep-alive, X-Route-To"},
		"X-Route-To":      {"admin"},
		"X-Hub-Signature": {"sha256=ab"},
	}
	got := KeptHeader(h)
	if _, ok := got["X-Route-To"]; ok {
		t.Errorf("a header named in Connection was kept: %v", got)
	}
	if _, ok := got["Connection"]; ok {
		t.Errorf("Connection was kept: %v", got)
	}
	if got.Get("X-Hub-Signature") != "sha256=ab" {
		t.Errorf("the signature header was lost: %v", got)
	}
}

// TestControlCharactersRefused: a delivery id or event type holding a
// control character (a tab, which a header may carry; C1's NEL) is a 400
// that says so and stores nothing, since such an id could never be
// forwarded in the Idempotency-Key header; spaces and other text pass.
// They were stored, and the event then failed every attempt.
func TestControlCharactersRefused(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}})
	for _, c := range []struct{ h []string }{
		{[]string{"X-Id", "evt\t2"}},
		{[]string{"X-Id", "nel\u0085inside"}},
		{[]string{"X-Id", "ok", "X-Type", "order\tcreated"}},
	} {
		status, _, reply := b.post(t, "a", strings.NewReader("{}"), c.h...)
		field := "delivery id"
		if c.h[len(c.h)-2] == "X-Type" {
			field = "event type"
		}
		if status != http.StatusBadRequest || !strings.Contains(reply, field+" holds a control character") {
			t.Errorf("%s %q: %d %s, want 400 saying the %s holds a control character", c.h[len(c.h)-2], c.h[len(c.h)-1], status, reply, field)
		}
	}
	if status, _, reply := b.post(t, "a", strings.NewReader("{}"), "X-Id", "evt 2 é", "X-Type", "order created"); status != http.StatusAccepted {
		t.Errorf("id and type with spaces: %d %s, want 202", status, reply)
	}
	if n := len(b.rec.stored()); n != 1 {
		t.Errorf("%d stored, want 1", n)
	}
}
