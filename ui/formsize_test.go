package ui_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestLargeFormsRefused: a console form over 64 KiB is refused with 413,
// at the login form (which any client may post, no token needed) and
// behind the token alike, whether its length is declared or streamed.
// net/http's own bound is 10 MB a request, held in memory outside the
// webhooks' body budget: 30 such logins took a server from 25 MB of heap
// to 700 MB.
func TestLargeFormsRefused(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	big := "token=" + strings.Repeat("a", 1<<20)
	for _, c := range []struct {
		path, auth string
		chunked    bool
	}{
		{path: "/ui/login"},
		{path: "/ui/login", chunked: true},
		{path: "/ui/replay", auth: "Bearer " + token},
		{path: "/ui/replay", auth: "Bearer " + token, chunked: true},
	} {
		var body io.Reader = strings.NewReader(big)
		if c.chunked {
			body = struct{ io.Reader }{body} // its length hidden: sent chunked
		}
		req, _ := http.NewRequest("POST", a.admin+c.path, body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s of a 1 MiB form (chunked %v) = %d, want 413", c.path, c.chunked, resp.StatusCode)
		}
	}
}
