package ui_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// rawConsoleRequest writes to a new connection to base a request that
// announces a body of length bytes and sends only first of it, and
// returns a reader of the replies whose reads fail after wait.
func rawConsoleRequest(t *testing.T, base, method, path, header string, length int, first string, wait time.Duration) *bufio.Reader {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
		method, path, header, length, first); err != nil {
		t.Fatal(err)
	}
	return bufio.NewReader(c)
}

// replyThenClosed reads the reply on br, checks its status, and checks
// that the server then closed the connection (EOF) rather than the read's
// deadline passing.
func replyThenClosed(t *testing.T, br *bufio.Reader, want int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Errorf("status %d, want %d", resp.StatusCode, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the reply the connection gave %v, want it closed", err)
	}
}

// TestConsoleUnreadBodyClosesSoon: on the admin listener, a request that
// announces a body and withholds it is answered at once, and its
// connection closed, wherever the body is not needed: the console's
// refusals before any form is read (no session, a wrong Bearer token, a
// login posted from another site, a login form larger than its bound),
// its pages asked with a body, the mux's redirects (POST /ui, an unclean
// path), the listener's 404 catch-all and /metrics. Each held the
// connection, unanswered, until the server's read timeout (a minute): net/http
// read up to 256 KiB of the body before writing the reply.
func TestConsoleUnreadBodyClosesSoon(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	for _, c := range []struct {
		method, path, header string
		length               int
		want                 int
	}{
		{"POST", "/ui/replay", "", 1000, http.StatusUnauthorized},
		{"POST", "/ui/events/1/skip", "Authorization: Bearer wrong\r\n", 1000, http.StatusUnauthorized},
		{"POST", "/ui/login", "Sec-Fetch-Site: cross-site\r\n", 1000, http.StatusForbidden},
		{"POST", "/ui/login", "", 100_000, http.StatusRequestEntityTooLarge},
		{"GET", "/ui/", "", 1000, http.StatusSeeOther},
		{"GET", "/ui/events", "Authorization: Bearer " + token + "\r\n", 1000, http.StatusOK},
		{"POST", "/ui", "", 1000, http.StatusTemporaryRedirect},
		{"POST", "//ui/login", "", 1000, http.StatusTemporaryRedirect},
		{"POST", "/nope", "", 1000, http.StatusNotFound},
		{"GET", "/metrics", "", 1000, http.StatusOK},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			t.Parallel()
			// Well within the read timeout: a reply, or the close, that
			// waited for it fails the read.
			replyThenClosed(t, rawConsoleRequest(t, a.admin, c.method, c.path, c.header, c.length, "", 20*time.Second), c.want)
		})
	}
}
