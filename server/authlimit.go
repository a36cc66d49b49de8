package server

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The allowance of wrong admin tokens per client: AuthBurst at once, and
// one more every AuthRefill after that (ten a minute).
const (
	AuthBurst  = 10
	AuthRefill = 6 * time.Second
)

// maxAuthClients bounds the clients an AuthLimiter keeps a count for; past
// it, clients not yet counted share one count.
const maxAuthClients = 4096

// AuthLimiter slows down whoever guesses the admin token. Each client (its
// address, as the server tells it for allow_ips through trusted proxies;
// an IPv6 address by its /64) may send AuthBurst wrong tokens at once and
// one more every AuthRefill; past that, a request of that client carrying
// a token is answered 429 with Retry-After, without its token being
// compared, until it has earned a guess back. A right token costs
// nothing, and neither does a request that carries none. The admin API
// and the console share one limiter, so guesses at either count together.
// Its memory is bounded (maxAuthClients counts). The zero value is not
// usable: use NewAuthLimiter. A nil *AuthLimiter limits nothing.
type AuthLimiter struct {
	trusted []netip.Prefix
	now     func() time.Time

	mu      sync.Mutex
	clients map[netip.Addr]*guesses
}

// guesses is one client's allowance: left guesses as of at.
type guesses struct {
	left float64
	at   time.Time
}

// NewAuthLimiter returns a limiter that tells clients apart by their
// address, believing the forwarding headers of the peers in trusted.
func NewAuthLimiter(trusted []netip.Prefix) *AuthLimiter {
	return &AuthLimiter{trusted: trusted, now: time.Now, clients: map[netip.Addr]*guesses{}}
}

// Take spends one of r's client's guesses before its token is compared,
// so that requests sent at once cannot all pass on the last one, and
// reports true; or, out of guesses, reports false and how long until the
// client has one again. Call Refund when the token was right.
func (l *AuthLimiter) Take(r *http.Request) (wait time.Duration, ok bool) {
	if l == nil {
		return 0, true
	}
	key := clientKeyOf(r, l.trusted)
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.clients[key]
	if g == nil {
		if len(l.clients) >= maxAuthClients {
			l.forgetRefilled()
		}
		if len(l.clients) >= maxAuthClients {
			key = netip.Addr{} // the shared count of the clients past the bound
			g = l.clients[key]
		}
		if g == nil {
			g = &guesses{left: AuthBurst, at: l.now()}
			l.clients[key] = g
		}
	}
	left := l.refill(g)
	if left < 1 {
		return time.Duration((1 - left) * float64(AuthRefill)), false
	}
	g.left = left - 1
	return 0, true
}

// Refund gives back the guess Take spent on a right token.
func (l *AuthLimiter) Refund(r *http.Request) {
	if l == nil {
		return
	}
	key := clientKeyOf(r, l.trusted)
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.clients[key]; g != nil {
		g.left = math.Min(AuthBurst, l.refill(g)+1)
	}
}

// refill brings g's allowance up to now and returns it.
func (l *AuthLimiter) refill(g *guesses) float64 {
	now := l.now()
	if d := now.Sub(g.at); d > 0 {
		g.left = math.Min(AuthBurst, g.left+float64(d)/float64(AuthRefill))
		g.at = now
	}
	return g.left
}

// forgetRefilled drops the counts back at the full allowance: they hold
// nothing a fresh count would not.
func (l *AuthLimiter) forgetRefilled() {
	for k, g := range l.clients {
		if l.refill(g) >= AuthBurst {
			delete(l.clients, k)
		}
	}
}

// TooManyGuesses sets Retry-After on w for a client AuthLimiter.Take
// refused, and returns the message to answer it with (status 429).
func TooManyGuesses(w http.ResponseWriter, wait time.Duration) string {
	secs := strconv.Itoa(max(int(math.Ceil(wait.Seconds())), 1))
	w.Header().Set("Retry-After", secs)
	return "too many wrong admin tokens from your address; retry in " + secs + " s"
}

// clientKeyOf is what r's client is told by: its address (the one
// allow_ips is judged on, so behind a trusted proxy the client it names),
// an IPv6 one cut to its /64; the zero address when it cannot be told.
func clientKeyOf(r *http.Request, trusted []netip.Prefix) netip.Addr {
	addr, ok := clientAddr(r, trusted)
	if !ok {
		return netip.Addr{}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}
