package ui_test

import (
	"html"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestListingRefusesBadFilter: a console listing given a filter it cannot
// read (a wrong value, a parameter given twice) answers 400, as the admin
// API does, and still renders its page: the filter form, with what was
// typed in it, and a message naming the filter and what it takes, so the
// operator can correct it there. No table of events is shown, which would
// read as "none match". The listing answered 200 before.
func TestListingRefusesBadFilter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink, failing := newSink(t)
		a := startApp(t, dbURL, sink, rightSecret, failing)
		if a.send(rightSecret, "msg_1", []byte(`{"type":"a"}`)) != 202 {
			t.Fatal("delivery refused")
		}
		for _, c := range []struct {
			path string
			want []string // in the page's message, unescaped
			form string   // the filter form's action
		}{
			{"/ui/events?status=bogus", []string{"status: want pending, processing, done, dead"}, "/ui/events"},
			{"/ui/events?since=notatime", []string{`since: "notatime": want a duration back from now`, `value="notatime"`}, "/ui/events"},
			{"/ui/events?until=0001-01-01", []string{"until:", "want a time after"}, "/ui/events"},
			{"/ui/events?before_id=-1", []string{"before_id: want a positive id"}, "/ui/events"},
			{"/ui/events?limit=0", []string{"limit: want a whole number from 1 to"}, "/ui/events"},
			{"/ui/events?status=done&status=dead", []string{"status: given 2 times; give it once"}, "/ui/events"},
			{"/ui/events?source=polar&source=other", []string{"source: given 2 times"}, "/ui/events"},
			{"/ui/dead?since=notatime", []string{`since: "notatime": want`}, "/ui/dead"},
			{"/ui/dead?before_id=x", []string{"before_id: want a positive id"}, "/ui/dead"},
			{"/ui/rejected?status=abc", []string{"status: want an HTTP status such as 401"}, "/ui/rejected"},
			{"/ui/rejected?since=1h&since=2h", []string{"since: given 2 times"}, "/ui/rejected"},
		} {
			code, page, _ := a.get(c.path)
			text := html.UnescapeString(page)
			if code != 400 {
				t.Errorf("GET %s = %d, want 400", c.path, code)
			}
			if !strings.Contains(page, `action="`+c.form+`" class="filters"`) {
				t.Errorf("GET %s: the page has no filter form:\n%s", c.path, page)
			}
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("GET %s: the page does not say %q:\n%s", c.path, w, page)
				}
			}
			if !strings.Contains(text, "Correct the filter") || !strings.Contains(page, `role="alert"`) {
				t.Errorf("GET %s: the page does not tell the operator to correct the filter:\n%s", c.path, page)
			}
			if strings.Contains(page, "<table") {
				t.Errorf("GET %s: the page shows a table, which reads as nothing matching:\n%s", c.path, page)
			}
			if strings.Contains(page, `action="/ui/replay"`) {
				t.Errorf("GET %s: the page offers to replay what a filter it could not read matches", c.path)
			}
		}
		// The same pages with a filter they can read list as before.
		for _, p := range []string{"/ui/events?status=dead&since=1h", "/ui/events?before_id=5&limit=10", "/ui/dead?since=7d",
			"/ui/rejected?status=401&since=1d"} {
			if code, page, _ := a.get(p); code != 200 || !strings.Contains(page, "<table") || strings.Contains(page, `role="alert"`) {
				t.Errorf("GET %s = %d, want 200 with the listing and no message:\n%s", p, code, page)
			}
		}
	})
}
