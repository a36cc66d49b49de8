package server

import (
	"net"
	"net/netip"
	"sync"
)

// DefaultMaxClientConnections is how many connections one client may hold
// open at once when the configuration does not say.
const DefaultMaxClientConnections = 256

// LocalPrefixes are the loopback, private and link-local networks, where
// the proxies and load balancers in front of a receiver sit: connections
// from them carry many clients', and serve passes them to LimitClients as
// exempt.
var LocalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
}

// LimitClients returns a listener that lets one client hold at most max
// connections open at once, so that no single host can hold the memory
// (buffers, goroutines) and file descriptors of thousands of idle or slow
// connections, or the share of the body budget they would win together.
// A client is its peer address (an IPv6 address by its /64); peers in
// exempt, the trusted proxies that carry many clients' connections, are
// not limited. A connection past the limit is closed as soon as it is
// accepted, before a byte is read (the sender sees a reset and tries
// again later, as for any connection error), and refused is called with
// the client, if set. max ≤ 0 returns ln itself.
func LimitClients(ln net.Listener, max int, exempt []netip.Prefix, refused func(client netip.Addr)) net.Listener {
	if max <= 0 {
		return ln
	}
	return &clientLimiter{Listener: ln, max: max, exempt: exempt, refused: refused, open: map[netip.Addr]int{}}
}

type clientLimiter struct {
	net.Listener
	max     int
	exempt  []netip.Prefix
	refused func(netip.Addr)

	mu   sync.Mutex
	open map[netip.Addr]int // connections open per client; no entry at 0
}

// Accept returns the next connection whose client is under its limit,
// closing those that are not.
func (l *clientLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ok := l.client(c)
		if !ok {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[key]
		if n >= l.max {
			l.mu.Unlock()
			c.Close()
			if l.refused != nil {
				l.refused(key)
			}
			continue
		}
		l.open[key] = n + 1
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

// client returns the key c's client is counted under, or false for a
// peer that is not limited (a trusted proxy, or an address that is not
// IP).
func (l *clientLimiter) client(c net.Conn) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if within(addr, l.exempt) {
		return netip.Addr{}, false
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		addr = p.Addr()
	}
	return addr, true
}

func (l *clientLimiter) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] <= 1 {
		delete(l.open, key)
	} else {
		l.open[key]--
	}
}

// limitedConn gives its client's place back when it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
