package pgtest

import (
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// cancelRequestCode is the protocol's code of a CancelRequest message,
// which a client sends on a connection of its own.
const cancelRequestCode = 80877102

// LateCanceller relays connections to the server at upstream, and hands
// it each cancel request late: it answers the client at once (closes the
// connection, as the server does once it has read the request) and sends
// the request on only after late. That is what a loaded server does when
// the signal a cancel request becomes reaches the session's process after
// the statement it was meant for has ended. It returns its address.
func LateCanceller(t testing.TB, upstream string, late time.Duration) string {
	t.Helper()
	addr, _ := relayCancels(t, upstream, late)
	return addr
}

// CountCancels relays connections to the server at upstream, cancel
// requests included, and counts the cancel requests clients sent. It
// returns its address and the count so far.
func CountCancels(t testing.TB, upstream string) (addr string, sent func() int64) {
	t.Helper()
	return relayCancels(t, upstream, 0)
}

// relayCancels is LateCanceller and CountCancels: it relays connections
// to upstream, each cancel request late (none when late is 0), and
// counts the cancel requests.
func relayCancels(t testing.TB, upstream string, late time.Duration) (string, func() int64) {
	t.Helper()
	var sent atomic.Int64
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return ServeConns(t, func(c net.Conn) {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		if binary.BigEndian.Uint32(head[:4]) == 16 && binary.BigEndian.Uint32(head[4:]) == cancelRequestCode {
			req := make([]byte, 16)
			copy(req, head[:])
			if _, err := io.ReadFull(c, req[8:]); err != nil {
				return
			}
			c.Close()
			sent.Add(1)
			select {
			case <-time.After(late):
			case <-done:
				return
			}
			if up, err := net.Dial("tcp", upstream); err == nil {
				up.Write(req)
				io.Copy(io.Discard, up) // the server closes it once it has signalled
				up.Close()
			}
			return
		}
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			return
		}
		defer up.Close()
		up.Write(head[:])
		go io.Copy(up, c)
		io.Copy(c, up)
	}), sent.Load
}

// ServeConns listens on a port of its own until the test ends, and runs
// handle on each connection it accepts (closing it after), each on a
// goroutine of its own. It returns the address.
func ServeConns(t testing.TB, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}
