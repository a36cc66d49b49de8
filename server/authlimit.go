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
// it, clients not yet counted share one count. maxKnownClients bounds the
// addresses remembered for having shown the right token, which always get
// a count of their own.
const (
	maxAuthClients  = 4096
	maxKnownClients = 64
)

// Keys of counts that are not one client's.
var (
	// sharedKey is the count of the clients past maxAuthClients.
	sharedKey = netip.Addr{}
	// unknownKey is the count of the requests whose client cannot be told
	// (forwarding headers of a trusted proxy that disagree). No client's
	// key is ::1: an IPv6 key is a /64, whose last 64 bits are zero.
	unknownKey = netip.IPv6Loopback()
)

// AuthLimiter slows down whoever guesses the admin token. Each client (its
// address, as the server tells it for allow_ips through trusted proxies;
// an IPv6 address by its /64) may send AuthBurst wrong tokens at once and
// one more every AuthRefill; past that, a request of that client carrying
// a token is answered 429 with Retry-After, without its token being
// compared, until it has earned a guess back. A right token costs
// nothing, and neither does a request that carries none. The admin API
// and the console share one limiter, so guesses at either count together.
// Requests whose client cannot be told share a count of their own. Its
// memory is bounded: maxAuthClients counts, past which new clients share
// one, except the last maxKnownClients addresses that showed the right
// token since the process started (an operator keeps a count of its own
// however many addresses guess). The zero value is not usable: use
// NewAuthLimiter. A nil *AuthLimiter limits nothing.
type AuthLimiter struct {
	trusted []netip.Prefix
	now     func() time.Time

	mu      sync.Mutex
	clients map[netip.Addr]*guesses
	// known are the addresses that showed the right token, with when.
	known map[netip.Addr]time.Time
	// swept is when forgetRefilled last ran: it scans every count, so it
	// runs at most once a second.
	swept time.Time
}

// guesses is one client's allowance: left guesses as of at.
type guesses struct {
	left float64
	at   time.Time
}

// NewAuthLimiter returns a limiter that tells clients apart by their
// address, believing the forwarding headers of the peers in trusted.
func NewAuthLimiter(trusted []netip.Prefix) *AuthLimiter {
	return &AuthLimiter{trusted: trusted, now: time.Now, clients: map[netip.Addr]*guesses{}, known: map[netip.Addr]time.Time{}}
}

// Take spends one of r's client's guesses before its token is compared,
// so that requests sent at once cannot all pass on the last one, and
// reports true with a function that gives it back, to call when the token
// was right; or, out of guesses, reports false and how long until the
// client has one again.
func (l *AuthLimiter) Take(r *http.Request) (refund func(), wait time.Duration, ok bool) {
	if l == nil {
		return func() {}, 0, true
	}
	client := clientKeyOf(r, l.trusted)
	if !client.IsValid() {
		client = unknownKey
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	key := client
	g := l.clients[key]
	if g == nil {
		if len(l.clients) >= maxAuthClients && now.Sub(l.swept) >= time.Second {
			l.swept = now
			l.forgetRefilled(now)
		}
		if _, known := l.known[key]; len(l.clients) >= maxAuthClients && !known {
			key = sharedKey
			g = l.clients[key]
		}
		if g == nil {
			g = &guesses{left: AuthBurst, at: now}
			l.clients[key] = g
		}
	}
	left := refill(g, now)
	if left < 1 {
		return nil, time.Duration((1 - left) * float64(AuthRefill)), false
	}
	g.left = left - 1
	return func() { l.refund(client, g) }, 0, true
}

// refund gives back a guess spent on a right token, to the count it was
// taken from, and remembers client as one that knows the token.
func (l *AuthLimiter) refund(client netip.Addr, g *guesses) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	g.left = math.Min(AuthBurst, refill(g, now)+1)
	if client == unknownKey {
		return
	}
	if _, ok := l.known[client]; !ok && len(l.known) >= maxKnownClients {
		var oldest netip.Addr
		var oldestAt time.Time
		for k, at := range l.known {
			if !oldest.IsValid() || at.Before(oldestAt) {
				oldest, oldestAt = k, at
			}
		}
		delete(l.known, oldest)
	}
	l.known[client] = now
}

// refill brings g's allowance up to now and returns it.
func refill(g *guesses, now time.Time) float64 {
	if d := now.Sub(g.at); d > 0 {
		g.left = math.Min(AuthBurst, g.left+float64(d)/float64(AuthRefill))
		g.at = now
	}
	return g.left
}

// forgetRefilled drops the counts back at the full allowance: they hold
// nothing a fresh count would not.
func (l *AuthLimiter) forgetRefilled(now time.Time) {
	for k, g := range l.clients {
		if refill(g, now) >= AuthBurst {
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
// allow_ips is judged on, so behind a trusted proxy the client it names)
// as addrKey keys it; the zero address when it cannot be told.
func clientKeyOf(r *http.Request, trusted []netip.Prefix) netip.Addr {
	addr, ok := clientAddr(r, trusted)
	if !ok {
		return netip.Addr{}
	}
	return addrKey(addr)
}

// addrKey is the key of a client at addr: the address, an IPv6 one cut to
// its /64 (what one host is commonly given).
func addrKey(addr netip.Addr) netip.Addr {
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}
