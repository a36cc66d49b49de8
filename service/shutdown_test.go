package service_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
)

// TestStopWithASenderStillSending: a stop (SIGTERM: the context ends)
// while a sender is still uploading its body waits for it no longer than
// the shutdown timeout, then closes its connection, and is a stop as
// planned: Serve returns nil. It waited a fixed 15 s whatever the
// timeout, and returned the drain's deadline as its error (exit 1).
func TestStopWithASenderStillSending(t *testing.T) {
	cfg, err := config.Parse([]byte("shutdown_timeout: 1s\n" + testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(t.TempDir(), "hookbox.db")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	svc, err := service.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, done := serve(t, ctx, svc)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Expect: 100-continue: the server says so once its handler reads the
	// body, so the request is known to be in flight before the stop.
	fmt.Fprintf(c, "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=%064x\r\n"+
		"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n", 0)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "100") {
		t.Fatalf("before the body: %q, %v; want 100 Continue", line, err)
	}
	fmt.Fprint(c, `{"partial`)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil for a stop as planned", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still draining 10 s after a stop with a 1 s shutdown timeout")
	}
}
