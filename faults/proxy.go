package faults

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy relays TCP connections from a loopback port to a target (a
// database server) and breaks them on demand, as a stopped server or a
// broken network would:
//
//   - Cut closes every relayed connection and refuses new ones (accepted
//     and closed at once) until Restore: a server that is down.
//   - BlackHole drops everything: relayed connections stop carrying bytes
//     in either direction, and new connections are accepted but never
//     answered nor forwarded, until Restore: a network that drops packets,
//     where nothing fails, it only never answers.
//   - Strand drops the bytes of the connections relayed now, for good,
//     and relays new ones as before: a firewall or NAT that forgot those
//     connections and silently drops their packets, while the database
//     itself is fine. Only their clients closing them ends them.
//
// Restore after a black hole closes the connections that lived through
// it (bytes were lost on them, as if they had timed out) and forwards new
// ones again. The listening port stays the same throughout, so clients
// reconnect to the same address.
type Proxy struct {
	target string
	ln     net.Listener
	hole   atomic.Bool // black hole: drop every byte

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]*atomic.Bool // a relayed connection's stranded flag; nil for one held in a black hole
	wg    sync.WaitGroup
}

// NewProxy listens on a loopback port and relays to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]*atomic.Bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// NewURLProxy starts a proxy to the server of dbURL (a postgres:// URL)
// and returns it with dbURL rewritten to connect through it.
func NewURLProxy(dbURL string) (*Proxy, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, "", err
	}
	p, err := NewProxy(u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// URLProxyFor starts a proxy to the server of dbURL for test t, closed
// when the test ends, and returns it with dbURL rewritten to connect
// through it. It fails t if the proxy cannot listen.
func URLProxyFor(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	p, via, err := NewURLProxy(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, via
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		if p.hole.Load() {
			p.hold(c)
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		stranded := new(atomic.Bool)
		p.conns[c], p.conns[up] = stranded, stranded
		p.mu.Unlock()
		p.wg.Add(2)
		go p.relay(up, c, stranded)
		go p.relay(c, up, stranded)
	}
}

// hold keeps a connection accepted during a black hole open, reading and
// dropping what the client sends, until it or Restore closes it.
func (p *Proxy) hold(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = nil
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(io.Discard, c)
		c.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
}

func (p *Proxy) relay(dst, src net.Conn, stranded *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hole.Load() && !stranded.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every relayed connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// BlackHole stops every byte, on the connections relayed now and on those
// accepted until Restore, without closing anything.
func (p *Proxy) BlackHole() { p.hole.Store(true) }

// Strand stops every byte of the connections relayed now, for good,
// without closing them; connections accepted later are relayed as usual.
// It returns how many connections it stranded (two per relayed one: the
// client's and the server's side).
func (p *Proxy) Strand() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, stranded := range p.conns {
		if stranded != nil {
			stranded.Store(true)
			n++
		}
	}
	return n
}

// Restore lets connections through again. After a black hole it first
// closes every connection that lived through it.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole.Load() {
		for c := range p.conns {
			c.Close()
		}
		p.hole.Store(false)
	}
	p.cut = false
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
