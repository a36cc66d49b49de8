package service_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// proxy is a TCP relay to PostgreSQL that a test can cut and restore, to
// play a database outage without stopping the shared server.
type proxy struct {
	t      *testing.T
	addr   string // listen address, fixed across restarts
	target string
	url    string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newProxy(t *testing.T, dbURL string) *proxy {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: u.Host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	u.Host = p.addr
	p.url = u.String()
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy restart: %v", err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and every relayed connection.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
