package server

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// DefaultMaxClientConnections is how many connections one client may hold
// open at once when the configuration does not say.
const DefaultMaxClientConnections = 256

// LocalPrefixes are the loopback, private, shared (carrier-grade NAT,
// overlay networks) and link-local networks, where the proxies and load
// balancers in front of a receiver sit: connections from them carry many
// clients', and serve passes them to NewClientLimit as exempt.
var LocalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
}

// ClientLimit lets one client hold at most a number of connections open
// at once, so that no single host can hold the memory (buffers,
// goroutines) and file descriptors of thousands of idle or slow
// connections, or the share of the body budget they would win together.
// A client is its peer address (an IPv6 address by its /64); peers in the
// exempt prefixes, the proxies that carry many clients' connections, are
// not limited. Set its ConnState as the http.Server's: a connection past
// the limit is closed as soon as the server has it, before a byte is
// read (the sender sees the connection closed and tries again later, as
// for any connection error). It counts connections as net/http reports
// them and leaves them as they are (a TLS connection stays one).
type ClientLimit struct {
	max     int
	exempt  []netip.Prefix
	refused func(netip.Addr)

	mu    sync.Mutex
	open  map[netip.Addr]int      // connections open per client; no entry at 0
	conns map[net.Conn]netip.Addr // the connections counted, by client
}

// NewClientLimit returns a limit of max connections per client, calling
// refused (if set) with the client of each connection it closes; nil,
// whose ConnState limits nothing, when max ≤ 0.
func NewClientLimit(max int, exempt []netip.Prefix, refused func(client netip.Addr)) *ClientLimit {
	if max <= 0 {
		return nil
	}
	return &ClientLimit{max: max, exempt: exempt, refused: refused, open: map[netip.Addr]int{}, conns: map[net.Conn]netip.Addr{}}
}

// ConnState counts a new connection against its client, closing it when
// the client holds its limit, and gives the place back when a counted
// connection closes or is hijacked. It has the shape of
// http.Server.ConnState.
func (l *ClientLimit) ConnState(c net.Conn, st http.ConnState) {
	if l == nil {
		return
	}
	switch st {
	case http.StateNew:
		key, ok := l.client(c)
		if !ok {
			return
		}
		l.mu.Lock()
		if l.open[key] >= l.max {
			l.mu.Unlock()
			if l.refused != nil {
				l.refused(key)
			}
			c.Close()
			return
		}
		l.open[key]++
		l.conns[c] = key
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		defer l.mu.Unlock()
		key, ok := l.conns[c]
		if !ok {
			return
		}
		delete(l.conns, c)
		if l.open[key] <= 1 {
			delete(l.open, key)
		} else {
			l.open[key]--
		}
	}
}

// client returns the key c's client is counted under, or false for a
// peer that is not limited (an exempt one, or an address that is not IP).
func (l *ClientLimit) client(c net.Conn) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if within(addr, l.exempt) {
		return netip.Addr{}, false
	}
	return addrKey(addr), true
}
