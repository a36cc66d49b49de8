package server

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// CloseUnreadBodies wraps h so that a reply h writes to a request whose
// body it has not read to the end is the connection's last, and
// net/http's read of the rest of that body after the reply is cut short
// (closeUnread). Without it net/http reads up to 256 KiB of the body
// before it writes the reply, so a client that announces a body and
// withholds it holds the connection, unanswered, for the whole read
// timeout. A request without a body, or whose body h reads to its end,
// is served as h serves it.
//
// The Server applies it to every request with a body but those to
// /webhooks/{source}, whose handlers deal with unread bodies themselves;
// wrap any other handler that may answer without reading a body (an
// admin listener's mux) with it. Wrapping twice is harmless.
func CloseUnreadBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if _, watched := r.Body.(*watchedBody); watched {
			h.ServeHTTP(w, r)
			return
		}
		// On a copy of the request: net/http tells from its own request's
		// body whether it closed the body early, and then lets the client
		// read the reply before it closes the connection (rather than
		// resetting it with the client's bytes unread).
		b := &watchedBody{ReadCloser: r.Body}
		r = r.WithContext(r.Context())
		r.Body = b
		uw := &unreadWriter{ResponseWriter: w, r: r, body: b}
		h.ServeHTTP(uw, r)
		// A handler that wrote nothing gets net/http's empty 200, written
		// after this returns.
		uw.check(http.StatusOK)
	})
}

// watchedBody is a request body that remembers whether it was read to
// its end.
type watchedBody struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	return n, err
}

// unreadWriter checks, as the reply's header is written, whether the
// request's body has been read to its end, and marks the reply as the
// connection's last when it has not.
type unreadWriter struct {
	http.ResponseWriter
	r       *http.Request
	body    *watchedBody
	checked bool
}

// check runs once, at the first final status (1xx replies come first and
// leave the body to be read).
func (w *unreadWriter) check(status int) {
	if w.checked || status < 200 {
		return
	}
	w.checked = true
	if !w.body.ended.Load() {
		closeUnread(w.ResponseWriter, w.r)
	}
}

func (w *unreadWriter) WriteHeader(status int) {
	w.check(status)
	w.ResponseWriter.WriteHeader(status)
}

func (w *unreadWriter) Write(p []byte) (int, error) {
	w.check(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach net/http's writer (read
// deadlines, flushes).
func (w *unreadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// receivePath reports whether the mux routes escapedPath, as it is, to
// /webhooks/{source} (POST) or its wrong-method answer: "/webhooks/" and
// one segment that cleaning leaves alone. Both handle a body they do not
// read themselves.
func receivePath(escapedPath string) bool {
	name, ok := strings.CutPrefix(escapedPath, "/webhooks/")
	return ok && name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}
