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

// TestSlowFormCutOff: a console form whose body stops coming is cut off
// after ten seconds with 408, at the login form (which needs no token)
// and behind the token alike, and its connection closed. Webhook bodies
// must keep up a minimum rate; the console's forms had only the server's
// read timeout, a minute, during which the connection and the form read
// so far were held.
func TestSlowFormCutOff(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	for _, c := range []struct{ path, header string }{
		{"/ui/login", ""},
		{"/ui/replay", "Authorization: Bearer " + token + "\r\n"},
	} {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel()
			// Ten seconds of form wait, thirty of the test's patience,
			// sixty of the server's read timeout.
			br := rawConsoleRequest(t, a.admin, "POST", c.path, c.header, 1000, "token=", 30*time.Second)
			start := time.Now()
			replyThenClosed(t, br, http.StatusRequestTimeout)
			t.Logf("answered and closed after %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestLoginFormBound: the login form, which any client may post, is
// bounded at 8 KiB (413 past it, whether its length is declared or
// streamed); the token and the page to return to need far less. The other
// forms keep their 64 KiB.
func TestLoginFormBound(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	form := "token=" + strings.Repeat("a", 9<<10)
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(form)
		if chunked {
			body = struct{ io.Reader }{body} // its length hidden: sent chunked
		}
		req, _ := http.NewRequest("POST", a.admin+"/ui/login", body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a 9 KiB login form (chunked %v): %d, want 413", chunked, resp.StatusCode)
		}
	}
	// A login of ordinary size is read and judged.
	resp, err := http.PostForm(a.admin+"/ui/login", map[string][]string{"token": {"wrong"}, "next": {"/ui/events?" + strings.Repeat("x", 2000)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token in a 2 KiB form: %d, want 401", resp.StatusCode)
	}
}
