package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/ui"
)

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so each answer can be checked.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// login logs c in and returns the CSRF token of its session.
func login(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, _ := fetch(t, c, "POST", base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/events"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/events" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie string
	for _, sc := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "hookbox_session=") {
			cookie = sc
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, token) {
		t.Errorf("the session cookie holds the admin token")
	}
	_, page := fetch(t, c, "GET", base+"/ui/events", nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the events page")
	}
	return m[1]
}

// TestConsoleAuth: pages need the token (cookie or Bearer); a login
// refuses a wrong token; a POST with the cookie but without the CSRF
// token changes nothing; the console is off without a token and lives on
// the admin listener only.
func TestConsoleAuth(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink, failing := newSink(t)
		failing.Store(true)
		a := startApp(t, dbURL, sink, rightSecret, failing)
		if a.send(rightSecret, "msg_dead", []byte(`{"type":"a"}`)) != 202 {
			t.Fatal("delivery refused")
		}
		ev := a.eventByDelivery("msg_dead", hookbox.StatusDead)
		c := browser(t)

		resp, _ := fetch(t, c, "GET", a.admin+"/ui/events?source=polar", nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fevents%3Fsource%3Dpolar" {
			t.Errorf("a page without a session: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := fetch(t, c, "POST", a.admin+"/ui/login", url.Values{"token": {"not-it"}}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a wrong token logs in: %d", resp.StatusCode)
		}
		if resp, _ := fetch(t, c, "POST", a.admin+"/ui/login", url.Values{"token": {token}, "next": {"//evil.example/"}}); resp.Header.Get("Location") != "/ui/" {
			t.Errorf("login redirects to %q", resp.Header.Get("Location"))
		}
		csrf := login(t, c, a.admin)

		replay := a.admin + "/ui/events/" + strconv.FormatInt(ev.ID, 10) + "/replay"
		for _, form := range []url.Values{{}, {"csrf": {"0000"}}} {
			if resp, _ := fetch(t, c, "POST", replay, form); resp.StatusCode != http.StatusForbidden {
				t.Errorf("replay with CSRF %v: %d, want 403", form, resp.StatusCode)
			}
		}
		if got, _ := a.svc.Store.Event(context.Background(), ev.ID); got.Status != hookbox.StatusDead {
			t.Fatalf("a POST without the CSRF token changed the event: %s", got.Status)
		}
		failing.Store(false)
		if resp, _ := fetch(t, c, "POST", replay, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("replay with the CSRF token: %d", resp.StatusCode)
		}
		a.eventByDelivery("msg_dead", hookbox.StatusDone)

		if st, _, h := a.get("/ui/"); st != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("Bearer overview: %d, CSP %q", st, h.Get("Content-Security-Policy"))
		}
		// A script posts with the Bearer token and no CSRF token.
		req, _ := http.NewRequest("POST", a.admin+"/ui/replay", strings.NewReader("dry_run=1&source=polar"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
			t.Errorf("a Bearer POST: %v %v", resp, err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), "would be replayed: dead events with source polar") {
				t.Errorf("a Bearer dry run: %s", b)
			}
		}
		req, _ = http.NewRequest("GET", a.admin+"/ui/", nil)
		req.Header.Set("Authorization", "Bearer wrong")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a wrong Bearer token: %v %v", resp.StatusCode, err)
		}
		if resp, _ := fetch(t, c, "GET", a.hooks+"/ui/", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("/ui/ on the webhook port: %d", resp.StatusCode)
		}
		// Log out: the cookie is cleared.
		if resp, _ := fetch(t, c, "POST", a.admin+"/ui/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("logout: %d", resp.StatusCode)
		}
		if resp, _ := fetch(t, c, "GET", a.admin+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after logout: %d, want the login form", resp.StatusCode)
		}
	})
}

// TestConsoleOffWithoutToken: no token, no routes.
func TestConsoleOffWithoutToken(t *testing.T) {
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, mustRequest(t, "GET", "/ui/login"))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/ui/login without a token: %d", rec.Code)
	}
}

// TestConsoleEscapesSenderText: an event type, a delivery id, a header
// and a payload holding markup, and a rejected delivery to a source name
// holding markup, render as text; signature values are masked.
func TestConsoleEscapesSenderText(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		d := storetest.Delivery("polar", hostile)
		d.EventType = hostile
		d.Header = http.Header{"X-Note": {hostile}, "Webhook-Signature": {"v1,c2lnbmF0dXJlLXRoYXQtbXVzdC1ub3Qtc2hvdw=="}}
		d.Payload = []byte(`{"html":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}`)
		id := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), hostile, d)[0]
		rj := storetest.Rejection(hostile, 404, time.Now())
		rj.UnknownSource, rj.Body, rj.Reason = true, []byte(hostile), hostile
		if _, err := st.AddRejections(context.Background(), []hookbox.Rejection{rj}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		for _, path := range []string{"/ui/", "/ui/events", "/ui/events?type=" + url.QueryEscape(hostile), "/ui/dead",
			"/ui/events/" + strconv.FormatInt(id, 10), "/ui/rejected", "/ui/rejected/1"} {
			page := okPage(t, srv, path)
			mustNotContainMarkup(t, page, path)
			if strings.Contains(page, "c2lnbmF0dXJl") {
				t.Errorf("%s shows the signature", path)
			}
		}
	})
}

// TestConsoleShowsHeaderBytes: a stored header value with a byte that is
// not UTF-8 (a Latin-1 é, which net/http accepts) is shown with that byte
// written \xe9, as the CLI writes it, not as U+FFFD: the store keeps the
// byte, and the page says which it was.
func TestConsoleShowsHeaderBytes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		d := storetest.Delivery("polar", "latin-1")
		d.Header = http.Header{"X-Note": {"caf\xe9 \xff-\xfe"}, "X-Utf8": {"café"}}
		id := storetest.Seed(t, st, hookbox.StatusDone, time.Now(), "", d)[0]
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		rec := httptest.NewRecorder()
		req := mustRequest(t, "GET", "/ui/events/"+strconv.FormatInt(id, 10))
		req.Header.Set("Authorization", "Bearer "+token)
		srv.ServeHTTP(rec, req)
		page := rec.Body.String()
		if rec.Code != 200 {
			t.Fatalf("event page: %d", rec.Code)
		}
		if !strings.Contains(page, `caf\xe9 \xff-\xfe`) || !strings.Contains(page, "café") {
			t.Errorf("event page does not show X-Note as caf\\xe9 \\xff-\\xfe and X-Utf8 as café:\n%s", page)
		}
		if !utf8.ValidString(page) || strings.Contains(page, "\uFFFD") || strings.Contains(strings.ToLower(page), "&#xfffd;") {
			t.Errorf("event page shows a byte as U+FFFD or raw:\n%s", page)
		}
	})
}

// okPage GETs path from srv with the console's token and returns the
// page, noting an error unless the answer is 200.
func okPage(t *testing.T, srv http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := mustRequest(t, "GET", path)
	req.Header.Set("Authorization", "Bearer "+token)
	srv.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("%s: %d", path, rec.Code)
	}
	return rec.Body.String()
}

func mustRequest(t *testing.T, method, path string) *http.Request {
	req, err := http.NewRequest(method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestConsolePages: the uncertain page lists a recorded send that was
// attempted and not confirmed; a binary payload is shown as a hex dump; a
// bad filter is explained on the page, not a failure; paging links to
// the next page.
func TestConsolePages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		storetest.SeedSends(t, st, hookbox.StatusDead, time.Now(), "smtp said no", "email", "order-1")
		bin := storetest.Delivery("polar", "binary")
		bin.Payload = []byte{0xff, 0x00, 0xfe, 'x'}
		binID := storetest.Seed(t, st, hookbox.StatusPending, time.Now(), "", bin)[0]
		for i := range 3 {
			storetest.Seed(t, st, hookbox.StatusPending, time.Now(), "", storetest.Delivery("polar", "p"+strconv.Itoa(i)))
		}
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		getCode := func(path string, want int) string {
			rec := httptest.NewRecorder()
			req := mustRequest(t, "GET", path)
			req.Header.Set("Authorization", "Bearer "+token)
			srv.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Fatalf("%s: %d, want %d", path, rec.Code, want)
			}
			return rec.Body.String()
		}
		get := func(path string) string { return getCode(path, 200) }
		if page := get("/ui/uncertain"); !strings.Contains(page, "order-1") || !strings.Contains(page, "smtp said no") {
			t.Errorf("uncertain page lacks the send")
		}
		if page := get("/ui/events/" + strconv.FormatInt(binID, 10)); !strings.Contains(page, "shown as binary") || !strings.Contains(page, "ff 00 fe 78") {
			t.Errorf("binary payload page:\n%s", page)
		}
		if page := getCode("/ui/events?status=sideways", 400); !strings.Contains(page, "status: want pending") {
			t.Errorf("a bad filter is not explained")
		}
		page := get("/ui/events?source=polar&limit=2")
		if !strings.Contains(page, `rel="next"`) || !strings.Contains(page, "before_id=") {
			t.Errorf("no next page link:\n%s", page)
		}
	})
}

// TestConsoleEscapesUnprintable: a delivery id, event type and header
// value holding a bidi override or a zero-width character, and an
// unknown source name with one, are shown escaped (\u202e), as the CLI
// shows them: raw, "evt_\u202egnp.exe" rendered as "evt_exe.png" and
// could pass for another id.
// TestConsoleDeepJSONShownAsText: a sender without the secret posts a
// 60 KiB JSON body of 2,000 nested arrays; the rejected log keeps it, and
// its console page shows it as received rather than pretty-printed.
// Indented, each element gets a line indented by its depth: the page was
// 123 MB (2,000 times the body; 655 MB and 3.4 GB of memory at 10,000
// levels). A shallow JSON body is still pretty-printed.
func TestConsoleDeepJSONShownAsText(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	const depth = 2000
	n := (60<<10 - 2*depth) / 2
	deep := []byte(strings.Repeat("[", depth) + strings.TrimSuffix(strings.Repeat("0,", n), ",") + strings.Repeat("]", depth))
	shallow := []byte(`{"id":"msg_shallow","data":{"items":[1,2,3]}}`)
	for _, c := range []struct {
		id     string
		body   []byte
		pretty bool
	}{{"msg_deep", deep, false}, {"msg_shallow", shallow, true}} {
		if st := a.send(wrongSecret, c.id, c.body); st != http.StatusUnauthorized {
			t.Fatalf("send %s: %d, want 401", c.id, st)
		}
		var id int64
		await(t, "the rejection of "+c.id+" logged", func() bool {
			rs, err := a.svc.Store.Rejections(context.Background(), hookbox.RejectionFilter{Limit: 1})
			if err != nil || len(rs) != 1 || rs[0].Header.Get("Webhook-Id") != c.id {
				return false
			}
			id = rs[0].ID
			return true
		})
		st, page, _ := a.get("/ui/rejected/" + strconv.FormatInt(id, 10))
		if st != http.StatusOK {
			t.Fatalf("rejection page of %s: %d", c.id, st)
		}
		if max := 4*len(c.body) + 64<<10; len(page) > max {
			t.Errorf("a %d-byte rejected body made a %d-byte console page (%.0f times), want at most %d", len(c.body), len(page), float64(len(page))/float64(len(c.body)), max)
		}
		if got := strings.Contains(page, "\n  &#34;data&#34;: {"); got != c.pretty {
			t.Errorf("page of %s pretty-printed: %v, want %v", c.id, got, c.pretty)
		}
	}
}

func TestConsoleEscapesUnprintable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		const sly = "evt_\u202egnp.exe\u200b"
		d := storetest.Delivery("polar", sly)
		d.EventType = sly
		d.Header = http.Header{"X-Note": {sly}}
		id := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), sly, d)[0]
		rj := storetest.Rejection(sly, 404, time.Now())
		rj.UnknownSource, rj.Reason = true, "no source "+sly
		if _, err := st.AddRejections(context.Background(), []hookbox.Rejection{rj}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		srv := server.New(server.Config{})
		ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
		for _, path := range []string{"/ui/events", "/ui/dead", "/ui/events/" + strconv.FormatInt(id, 10), "/ui/rejected", "/ui/rejected/1"} {
			page := okPage(t, srv, path)
			if strings.ContainsAny(page, "\u202e\u200b") {
				t.Errorf("%s shows a bidi override or zero-width character unescaped", path)
			}
			if !strings.Contains(page, `evt_\u202egnp.exe\u200b`) {
				t.Errorf("%s does not show the escaped text", path)
			}
		}
	})
}
