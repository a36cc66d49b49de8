package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestWrongTokensSlowedDown: through the admin API over real HTTP, a
// client may send ten wrong tokens; the eleventh request carrying a token,
// right or wrong, gets 429 with Retry-After and its token is not judged,
// until a guess has come back (one every 6 s). Requests without a token
// cost nothing; another client (told apart behind a trusted proxy) is not
// affected; a right token costs nothing.
func TestWrongTokensSlowedDown(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	guesses := NewAuthLimiter([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	guesses.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	mux := http.NewServeMux()
	RegisterAdmin(mux, AdminConfig{Token: "the-right-admin-token", Guesses: guesses})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	get := func(client, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+"/admin/no-such-page", nil)
		req.Header.Set("X-Forwarded-For", client)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	status := func(client, token string) int { t.Helper(); return get(client, token).StatusCode }
	const right, a, b = "the-right-admin-token", "198.51.100.1", "198.51.100.2"

	if s := status(a, right); s != http.StatusNotFound {
		t.Fatalf("right token: %d, want the guarded 404", s)
	}
	for i := range AuthBurst {
		if s := status(a, "wrong"); s != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, s)
		}
	}
	resp := get(a, "wrong")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "6" {
		t.Fatalf("wrong token past the allowance: %d, Retry-After %q; want 429 and 6", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if s := status(a, right); s != http.StatusTooManyRequests {
		t.Fatalf("right token from a client out of guesses: %d, want 429 (no token is judged)", s)
	}
	for range 20 {
		if s := status(a, ""); s != http.StatusUnauthorized {
			t.Fatalf("no token: %d, want 401", s)
		}
	}
	if s := status(b, right); s != http.StatusNotFound {
		t.Fatalf("another client's right token: %d", s)
	}
	if s := status(b, "wrong"); s != http.StatusUnauthorized {
		t.Fatalf("another client's first wrong token: %d", s)
	}
	advance(AuthRefill)
	if s := status(a, right); s != http.StatusNotFound {
		t.Fatalf("right token after a guess came back: %d", s)
	}
	if s := status(a, "wrong"); s != http.StatusUnauthorized {
		t.Fatalf("the guess that came back: %d, want 401", s)
	}
	if s := status(a, "wrong"); s != http.StatusTooManyRequests {
		t.Fatalf("past it again: %d, want 429", s)
	}

	// Guesses sent at once cannot all pass on the last one.
	const c = "198.51.100.3"
	var wg sync.WaitGroup
	codes := make(chan int, 50)
	for range 50 {
		wg.Go(func() { codes <- status(c, "wrong") })
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for code := range codes {
		n[code]++
	}
	if n[http.StatusUnauthorized] != AuthBurst || n[http.StatusTooManyRequests] != 50-AuthBurst {
		t.Fatalf("50 wrong tokens at once: %v; want %d judged and the rest 429", n, AuthBurst)
	}
}

// guesser is an admin request from the i-th of many clients.
func guesser(i int) *http.Request {
	r := httptest.NewRequest("GET", "/admin/events", nil)
	r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
	return r
}

// TestAuthLimiterBounded: however many clients guess, the limiter keeps at
// most maxAuthClients counts (and one shared by the rest), and clients
// back at their full allowance are forgotten first.
func TestAuthLimiterBounded(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	l := NewAuthLimiter(nil)
	l.now = func() time.Time { return clock }
	req := guesser
	for i := range 3 * maxAuthClients {
		l.Take(req(i))
	}
	if n := len(l.clients); n > maxAuthClients+1 {
		t.Fatalf("%d counts kept for %d clients; want at most %d", n, 3*maxAuthClients, maxAuthClients+1)
	}
	// The clients past the bound share one count, so they ran out
	// together: a guard for the memory, not a way around the limit.
	if _, _, ok := l.Take(req(3*maxAuthClients + 1)); ok {
		t.Fatal("a new client past the bound got a guess the clients past it had spent")
	}
	clock = clock.Add(AuthBurst * AuthRefill)
	l.Take(req(5 * maxAuthClients))
	if n := len(l.clients); n > 2 {
		t.Fatalf("%d counts kept after every count refilled; want the refilled ones forgotten", n)
	}
}

// TestOperatorKeepsItsCount: with the limiter's memory full of guessing
// clients, the operator's address, which showed the right token before,
// keeps a count of its own, and its right tokens cost it nothing: neither
// the shared count the guessers drained nor an eviction of its own count
// locks it out. A right token charged to the shared count is given back
// to it.
func TestOperatorKeepsItsCount(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	l := NewAuthLimiter(nil)
	l.now = func() time.Time { return clock }
	req := func(addr string) *http.Request {
		r := httptest.NewRequest("GET", "/admin/events", nil)
		r.RemoteAddr = addr + ":1234"
		return r
	}
	const operator = "192.0.2.10"
	refund, _, ok := l.Take(req(operator))
	if !ok {
		t.Fatal("first right token refused")
	}
	refund()
	// Guessers fill the memory and drain the shared count; time passes
	// so that the sweep runs, evicting the operator's full count.
	for i := range maxAuthClients + 20 {
		l.Take(guesser(i))
	}
	clock = clock.Add(2 * time.Second)
	for i := range 20 {
		l.Take(guesser(maxAuthClients + 100 + i))
	}
	for i := range 3 * AuthBurst {
		refund, _, ok := l.Take(req(operator))
		if !ok {
			t.Fatalf("the operator's right token %d refused while guessers fill the limiter", i+1)
		}
		refund()
	}
}

// TestRefundToSharedCount: a right token from a client charged to the
// shared count (the limiter's memory full) gives the guess back there.
func TestRefundToSharedCount(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	l := NewAuthLimiter(nil)
	l.now = func() time.Time { return clock }
	req := guesser
	for i := range maxAuthClients {
		l.Take(req(i))
	}
	for i := range 3 * AuthBurst {
		refund, _, ok := l.Take(req(maxAuthClients + i))
		if !ok || l.clients[sharedKey] == nil {
			t.Fatalf("right token %d past the bound: ok %v, shared count %v", i+1, ok, l.clients[sharedKey])
		}
		refund()
	}
	if left := l.clients[sharedKey].left; left != AuthBurst {
		t.Fatalf("shared count at %v after right tokens only; want %d", left, AuthBurst)
	}
}

// TestLoopbackIsNotUnknown: an IPv6 loopback client (an SSH tunnel) has
// its own count, apart from the requests whose client cannot be told.
func TestLoopbackIsNotUnknown(t *testing.T) {
	l := NewAuthLimiter([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	unknown := httptest.NewRequest("GET", "/admin/events", nil)
	unknown.RemoteAddr = "10.0.0.1:1234"
	unknown.Header.Set("X-Forwarded-For", "192.0.2.1")
	unknown.Header.Set("Forwarded", "for=198.51.100.1") // disagrees: the client cannot be told
	for range AuthBurst + 1 {
		l.Take(unknown)
	}
	if _, _, ok := l.Take(unknown); ok {
		t.Fatal("the unknown clients' count did not run out")
	}
	tunnel := httptest.NewRequest("GET", "/admin/events", nil)
	tunnel.RemoteAddr = "[::1]:1234"
	if _, _, ok := l.Take(tunnel); !ok {
		t.Fatal("a client on ::1 shares the unknown clients' count")
	}
}
