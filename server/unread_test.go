package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// withheldBody writes to a new connection to url a request with the given
// method and path that announces a 1000-byte body and sends none of it,
// and returns a reader of the replies.
func withheldBody(t *testing.T, url, method, path string) *bufio.Reader {
	t.Helper()
	c := dialRaw(t, url)
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", method, path); err != nil {
		t.Fatal(err)
	}
	return bufio.NewReader(c)
}

// closedAfter reads the reply on br and then checks that the server
// closed the connection (EOF), not that the read's deadline (dialRaw's
// five seconds; the test servers have no read timeout) passed.
func closedAfter(t *testing.T, br *bufio.Reader, want int) {
	t.Helper()
	if got := replyOn(t, br); got != want {
		t.Errorf("status %d, want %d", got, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the reply the connection gave %v, want it closed", err)
	}
}

// TestRedirectsAndProbesWithUnreadBody: a request with a withheld body is
// answered at once, on a connection then closed, where net/http's mux
// redirects a subtree's bare path to its "/" (POST /admin, a path no
// webhook handler of ours writes) and by the health endpoints, which read
// no body whatever the method. Each got no reply until the read timeout
// (60 s in serve), as net/http read the body before writing the reply.
func TestRedirectsAndProbesWithUnreadBody(t *testing.T) {
	b := setup(t, Config{Sources: []Source{{Name: "a"}}})
	RegisterAdmin(b.srv, AdminConfig{Token: "unread-admin-token"})
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/admin", http.StatusTemporaryRedirect},
		{"PUT", "/admin?x=1", http.StatusTemporaryRedirect},
		{"GET", "/healthz", http.StatusOK},
		{"GET", "/readyz", http.StatusOK},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			t.Parallel()
			closedAfter(t, withheldBody(t, b.url, c.method, c.path), c.want)
		})
	}
}

// TestCloseUnreadBodies: on a mux of its own (the admin listener's), the
// wrapper answers a catch-all's 404, the mux's redirect and a handler that
// writes nothing without waiting for a withheld body, and closes their
// connections; a handler that reads the body to its end keeps its
// connection for the next request.
func TestCloseUnreadBodies(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such endpoint", http.StatusNotFound)
	})
	mux.HandleFunc("/tree/", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /read", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	})
	ts := httptest.NewServer(CloseUnreadBodies(CloseUnreadBodies(mux))) // twice: harmless
	t.Cleanup(ts.Close)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/nope", http.StatusNotFound},
		{"POST", "/tree", http.StatusTemporaryRedirect},
		{"GET", "/tree/x", http.StatusOK},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			t.Parallel()
			closedAfter(t, withheldBody(t, ts.URL, c.method, c.path), c.want)
		})
	}
	t.Run("read", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, ts.URL)
		br := bufio.NewReader(c)
		for i := range 2 {
			fmt.Fprintf(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d on the connection: %v", i+1, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "5" || resp.Close {
				t.Fatalf("request %d: %d %q (closing %v), want 200 \"5\" on a connection kept", i+1, resp.StatusCode, body, resp.Close)
			}
		}
	})
}

// TestCloseUnreadBodiesRepliesReadable: a client still sending a large
// body when the wrapped handler refuses it reads the refusal: net/http
// closes such a connection only after a pause that lets the client read
// the reply, and must still tell that it gave up on the body (a copy of
// the request carries the watched body, not net/http's own). With the
// body swapped on net/http's request, most of these requests ended in a
// connection reset instead of the 413.
func TestCloseUnreadBodiesRepliesReadable(t *testing.T) {
	ts := httptest.NewServer(CloseUnreadBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})))
	t.Cleanup(ts.Close)
	big := bytes.Repeat([]byte("a"), 1<<20)
	for i := range 20 {
		resp, err := http.Post(ts.URL+"/x", "application/octet-stream", bytes.NewReader(big))
		if err != nil {
			t.Fatalf("request %d: %v, want the 413", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("request %d: %d, want 413", i+1, resp.StatusCode)
		}
	}
}

// TestCleanPath: the paths Server.ServeHTTP leaves out of
// CloseUnreadBodies (receivePath) are exactly those net/http's mux routes,
// as they are, to /webhooks/{source}'s two handlers, which deal with an
// unread body themselves; every other path, the unclean ones the mux
// redirects among them, goes through the wrapper.
func TestCleanPath(t *testing.T) {
	srv := New(Config{Sources: []Source{{Name: "a"}}})
	RegisterAdmin(srv, AdminConfig{Token: "clean-path-token"})
	for _, p := range []string{
		"/webhooks/a", "/webhooks/nope", "/webhooks/a%2Fb", "/webhooks/%2E", "/webhooks/%2e%2E", "/webhooks/a%20b",
		"/webhooks/a/", "//webhooks/a", "/webhooks/./a", "/webhooks/.", "/webhooks/..", "/webhooks/a/.",
		"/webhooks/", "/webhooks", "/webhooks//a", "/webhooks%2Fa", "/webhooks/a/b", "/admin", "/admin/", "/",
	} {
		for _, method := range []string{"POST", "GET"} {
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			h, pattern := srv.mux.Handler(req)
			routed := fmt.Sprintf("%T", h) != "*http.redirectHandler" &&
				(pattern == "POST /webhooks/{source}" || pattern == "/webhooks/{source}")
			if got := receivePath(req.URL.EscapedPath()); got != routed {
				t.Errorf("%s %s: receivePath %v, but the mux routes it to %q (%T)", method, p, got, pattern, h)
			}
		}
	}
}
