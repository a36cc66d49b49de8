package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestSlowBodyStoredGetsItsReply: an http.Server's WriteTimeout runs from
// the request's headers, and a body may take as long as it (hookbox
// serve: 60 s each). A delivery whose body came late in that time, and
// whose commit came after it, was stored and its sender got no reply, so
// sent it again. The reply now gets its time from the end of the body.
// (Here the WriteTimeout is 2 s, the body comes after 1.5 s, the commit
// 1.2 s later. Found by a helper's review, session 44.)
func TestSlowBodyStoredGetsItsReply(t *testing.T) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone})
	if err != nil {
		t.Fatal(err)
	}
	var stored atomic.Int32
	srv := server.New(server.Config{
		Sources: []server.Source{{Name: "a", Verifier: v}},
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			time.Sleep(1200 * time.Millisecond) // a busy disk, within StoreWait
			stored.Add(1)
			return hookbox.Receipt{ID: 1}, nil
		},
	})
	hs := &http.Server{Handler: srv, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const body = `{"ok":true}`
	fmt.Fprintf(c, "POST /webhooks/a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
	time.Sleep(1500 * time.Millisecond) // the sender's slow link
	if _, err := c.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stored %d deliveries, and the sender got no reply: %v", stored.Load(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202 (stored %d)", resp.StatusCode, stored.Load())
	}
}
