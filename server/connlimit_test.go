package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// dialServed opens a connection to addr and sends a request on it; it
// reports whether an answer came, or the connection was closed without one.
func dialServed(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return c, false // closed before the request went out
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("no answer and no close within 10 s")
		}
		return c, false
	}
	resp.Body.Close()
	c.SetDeadline(time.Time{})
	return c, resp.StatusCode == http.StatusOK
}

// TestOneClientConnectionsLimited: over real TCP, a client holding its
// limit of open connections has its next one closed before a byte is read
// (and counted), while those it holds are served; once it closes one, a
// new one is served again. A trusted proxy's connections are not limited.
func TestOneClientConnectionsLimited(t *testing.T) {
	serve := func(max int, exempt []netip.Prefix, refused func(netip.Addr)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: New(Config{}), ConnState: NewClientLimit(max, exempt, refused).ConnState}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		return ln.Addr().String()
	}
	var refusedN atomic.Int64
	addr := serve(3, nil, func(c netip.Addr) {
		if c != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("refused client %v", c)
		}
		refusedN.Add(1)
	})
	var held []net.Conn
	for i := range 3 {
		c, ok := dialServed(t, addr)
		if !ok {
			t.Fatalf("connection %d of 3 not served", i+1)
		}
		held = append(held, c)
	}
	extra, ok := dialServed(t, addr)
	extra.Close()
	if ok {
		t.Fatal("a fourth connection was served")
	}
	// Counted before it was closed; the count is read from another
	// goroutine, so wait for it to show.
	for deadline := time.Now().Add(10 * time.Second); refusedN.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("refused %d connections, want 1", refusedN.Load())
		}
	}
	for _, c := range held {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a held connection after the refusal: %v", err)
		}
	}
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, ok := dialServed(t, addr)
		c.Close()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served 10 s after the client closed one of its three")
		}
	}

	proxied := serve(3, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil)
	for i := range 10 {
		c, ok := dialServed(t, proxied)
		defer c.Close()
		if !ok {
			t.Fatalf("connection %d from a trusted proxy not served", i+1)
		}
	}
}

// addrConn is a connection that only has a remote address.
type addrConn struct {
	net.Conn
	remote string
}

func (c addrConn) RemoteAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.remote))
}

// TestClientKeyOfConnections: IPv6 peers are counted by their /64, IPv4
// ones (mapped or not) by their address.
func TestClientKeyOfConnections(t *testing.T) {
	l := NewClientLimit(1, nil, nil)
	key := func(remote string) netip.Addr {
		k, ok := l.client(addrConn{remote: remote})
		if !ok {
			t.Fatalf("%s not limited", remote)
		}
		return k
	}
	if key("[2001:db8::1]:1") != key("[2001:db8::ffff:2]:2") || key("[2001:db8::1]:1") == key("[2001:db8:0:1::1]:1") {
		t.Fatal("IPv6 peers not counted by their /64")
	}
	if key("[::ffff:192.0.2.1]:1") != key("192.0.2.1:2") || key("192.0.2.1:1") == key("192.0.2.2:1") {
		t.Fatal("IPv4 peers not counted by their address")
	}
}
