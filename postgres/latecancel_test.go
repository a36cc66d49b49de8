package postgres_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// cancelRequestCode is the protocol's code of a CancelRequest message,
// which a client sends on a connection of its own.
const cancelRequestCode = 80877102

// lateCanceller relays connections to the server at upstream, and hands
// it each cancel request late: it answers the client at once (closes the
// connection, as the server does once it has read the request) and sends
// the request on only after late. That is what a loaded server does when
// the signal a cancel request becomes reaches the session's process after
// the statement it was meant for has ended. It returns its address.
func lateCanceller(t *testing.T, upstream string, late time.Duration) string {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return serveConns(t, func(c net.Conn) {
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
	})
}

// TestLateCancelMissesTheNextStatement: a statement interrupted by its
// context sends the server a cancel request, which the server may act on
// after the statement has ended. The connection is not lent again, so the
// request cannot cancel another caller's statement. Before, the pool lent
// the connection to the next caller, whose statement failed with
// "canceling statement due to user request" (57014): one CI run saw a
// worker's finish fail so.
func TestLateCancelMissesTheNextStatement(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	const late = 500 * time.Millisecond
	u.Host = lateCanceller(t, u.Host, late)
	s := open(t, u.String())
	ctx := context.Background()

	c, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Conn().PgConn().PID()
	// The caller gives up 50 ms in; the statement ends on its own at
	// 300 ms, before its cancel request reaches the server (at 550 ms).
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	c.Exec(sctx, `SELECT pg_sleep(0.3)`)
	cancel()
	c.Release()

	// The next caller's statement runs across the moment the request
	// arrives.
	c, err = s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `SELECT pg_sleep($1::float8)`, (2 * late).Seconds()); err != nil {
		t.Fatalf("the next statement, on backend %d after %d was interrupted: %v", c.Conn().PgConn().PID(), pid, err)
	}
	if got := c.Conn().PgConn().PID(); got == pid {
		t.Errorf("the next caller was lent the interrupted connection (backend %d)", pid)
	}
}
