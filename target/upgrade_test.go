package target_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// switchingReceiver listens on 127.0.0.1 and answers every request with
// 101 Switching Protocols, then holds the connection, sending nothing,
// until release is called or the test ends. It returns the URL to forward
// to, and release, which closes the connections (a test that cleans up
// something stuck on them calls it first).
func switchingReceiver(t *testing.T) (url string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(hold)
			ln.Close()
		})
	}
	t.Cleanup(release)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
				<-hold
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook", release
}

// TestForwardSwitchingProtocolsIsRetried: a receiver that answers 101
// Switching Protocols and then holds the connection gets a failed attempt,
// to retry, at once. The 101 made the transport hand over the raw
// connection, whose reads no context stops, and Deliver read it as the
// reply's body: it never returned, and the worker kept extending the
// event's lease for ever.
func TestForwardSwitchingProtocolsIsRetried(t *testing.T) {
	url, _ := switchingReceiver(t)
	f := newForward(t, target.ForwardOptions{URL: url})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- f.Deliver(ctx, &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	}()
	select {
	case err := <-done:
		if err == nil || worker.IsPermanent(err) || !strings.HasPrefix(err.Error(), "forward: 101 Switching Protocols") {
			t.Errorf("Deliver = %v, want a 101 error to retry", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver still running 10 s into an attempt with a 1 s timeout (101 reply, connection held)")
	}
}

// TestSwitchingProtocolsEventRetriedAndPoolStops: end to end, an event
// whose receiver answers 101 every time uses up its attempts and ends
// dead, saying why, and the pool stops at once afterwards. It stayed
// processing, holding a slot, and Stop never returned, even with a
// deadline.
func TestSwitchingProtocolsEventRetriedAndPoolStops(t *testing.T) {
	url, release := switchingReceiver(t)
	f := newForward(t, target.ForwardOptions{URL: url})
	pol := worker.Policy{MaxAttempts: 2, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Timeout: time.Second}
	rg := newRig(t, map[string]worker.Target{"s": f}, pol)
	// Cleanups run last first: free a stuck attempt before the rig's Stop
	// waits for it, so that a failing test ends instead of hanging.
	t.Cleanup(release)
	id := rg.ingest(hookbox.Delivery{Source: "s", DeliveryID: "up", Payload: []byte(`{}`)})[0]
	e := rg.want(id, hookbox.StatusDead, 2)
	if !strings.Contains(e.LastError, "101 Switching Protocols") {
		t.Errorf("last error %q, want the 101", e.LastError)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rg.pool.Stop(ctx); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop: %v", err)
	}
}
