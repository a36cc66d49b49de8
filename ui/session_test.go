package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/ui"
)

// sessionOf returns the value of the session cookie c's jar holds for
// the console at base.
func sessionOf(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, err := url.Parse(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "hookbox_session" {
			return ck.Value
		}
	}
	t.Fatal("no session cookie in the jar")
	return ""
}

// withCookie sends a request carrying only this session cookie, as a
// copy of it would be sent from another machine, and returns the answer
// with its body.
func withCookie(t *testing.T, method, u, cookie string, form url.Values, header http.Header) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	for k, v := range header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "hookbox_session", Value: cookie})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestConsoleLogoutEndsSession: logging out ends the session itself, not
// only the browser's cookie: a copy of the cookie taken before, with the
// page's CSRF token, is refused afterwards (a page goes to the login
// form, a replay gets 401 and changes nothing), at the same server and at
// a second one on the same database (PostgreSQL: another process running
// beside it; SQLite: the process restarted). Another login, made in the
// same second, gets a cookie of its own and stays live.
func TestConsoleLogoutEndsSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink, failing := newSink(t)
		failing.Store(true)
		a := startApp(t, dbURL, sink, rightSecret, failing)
		if a.send(rightSecret, "msg_dead", []byte(`{"type":"a"}`)) != 202 {
			t.Fatal("delivery refused")
		}
		ev := a.eventByDelivery("msg_dead", hookbox.StatusDead)
		failing.Store(false)

		c, other := browser(t), browser(t)
		csrf := login(t, c, a.admin)
		login(t, other, a.admin)
		copied, otherCookie := sessionOf(t, c, a.admin), sessionOf(t, other, a.admin)
		if copied == otherCookie {
			t.Fatal("two logins got the same session cookie")
		}
		if resp, _ := withCookie(t, "GET", a.admin+"/ui/events", copied, nil, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("the copied cookie before logout: %d, want 200", resp.StatusCode)
		}

		resp, _ := fetch(t, c, "POST", a.admin+"/ui/logout", url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" ||
			!strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("logout: %d to %q, Set-Cookie %q", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Set-Cookie"))
		}

		replay := "/ui/events/" + strconv.FormatInt(ev.ID, 10) + "/replay"
		ended := func(base, where string) {
			t.Helper()
			resp, _ := withCookie(t, "GET", base+"/ui/events", copied, nil, nil)
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?") {
				t.Errorf("%s: a page with the cookie of a logged-out session: %d to %q, want the login form",
					where, resp.StatusCode, resp.Header.Get("Location"))
			}
			if !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
				t.Errorf("%s: the cookie of a logged-out session is not cleared: Set-Cookie %q", where, resp.Header.Get("Set-Cookie"))
			}
			if resp, _ := withCookie(t, "POST", base+replay, copied, url.Values{"csrf": {csrf}}, nil); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: a replay with the cookie of a logged-out session and its CSRF token: %d, want 401", where, resp.StatusCode)
			}
			if got, err := a.svc.Store.Event(context.Background(), ev.ID); err == nil && got.Status != hookbox.StatusDead {
				t.Fatalf("%s: a logged-out session replayed the event: %s", where, got.Status)
			}
			if resp, _ := withCookie(t, "GET", base+"/ui/events", otherCookie, nil, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("%s: the other session after one logged out: %d, want 200", where, resp.StatusCode)
			}
		}
		ended(a.admin, "the same server")

		if strings.HasPrefix(dbURL, "sqlite") {
			a.stop() // one process per file: the second server is the first restarted
		}
		b := startApp(t, dbURL, sink, rightSecret, failing)
		ended(b.admin, "a second server on the database")
	})
}

// TestConsoleRefusesWhenStoreCannotTell: when the store cannot say
// whether a session is live, its cookie is refused (503), never admitted,
// and a login is refused too.
func TestConsoleRefusesWhenStoreCannotTell(t *testing.T) {
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := browser(t)
	csrf := login(t, c, hs.URL)
	cookie := sessionOf(t, c, hs.URL)
	st.Close()

	resp, page := withCookie(t, "GET", hs.URL+"/ui/events", cookie, nil, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || strings.Contains(page, "csrf") {
		t.Errorf("a page while the store is closed: %d, Retry-After %q; want 503 and no page", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := withCookie(t, "POST", hs.URL+"/ui/replay", cookie, url.Values{"csrf": {csrf}, "source": {"polar"}}, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a POST while the store is closed: %d, want 503", resp.StatusCode)
	}
	if resp, page := fetch(t, browser(t), "POST", hs.URL+"/ui/login", url.Values{"token": {token}}); resp.StatusCode != http.StatusServiceUnavailable ||
		len(resp.Cookies()) != 0 || !strings.Contains(page, "could not be stored") {
		t.Errorf("a login while the store is closed: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}

// TestConsoleSecureBehindTrustedProxy: the session cookie (and the one
// that clears it) is Secure when a trusted proxy says its client came
// over HTTPS (X-Forwarded-Proto), and not when a peer that is not trusted
// says so, nor without the header.
func TestConsoleSecureBehindTrustedProxy(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	elsewhere := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	for _, tc := range []struct {
		what    string
		trusted []netip.Prefix
		proto   string
		secure  bool
	}{
		{"https from a trusted proxy", loopback, "https", true},
		{"https, then http, from a trusted proxy", loopback, "HTTPS, http", true},
		{"http from a trusted proxy", loopback, "http", false},
		{"no header from a trusted proxy", loopback, "", false},
		{"https from a peer not trusted", elsewhere, "https", false},
		{"https with no proxy trusted", nil, "https", false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			srv := server.New(server.Config{})
			ui.Register(srv, ui.Config{Token: token, Store: dbtest.Open(t, dbtest.SQLiteURL(t)), Sources: []string{"polar"},
				TrustedProxies: tc.trusted})
			hs := httptest.NewServer(srv)
			defer hs.Close()
			hdr := http.Header{}
			if tc.proto != "" {
				hdr.Set("X-Forwarded-Proto", tc.proto)
			}
			resp, _ := withCookie(t, "POST", hs.URL+"/ui/login", "", url.Values{"token": {token}}, hdr)
			cs := resp.Cookies()
			if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].HttpOnly {
				t.Fatalf("login: %d, cookies %v", resp.StatusCode, cs)
			}
			if cs[0].Secure != tc.secure {
				t.Errorf("login: the session cookie's Secure is %v, want %v", cs[0].Secure, tc.secure)
			}
			_, page := withCookie(t, "GET", hs.URL+"/ui/events", cs[0].Value, nil, hdr)
			m := csrfField.FindStringSubmatch(page)
			if m == nil {
				t.Fatal("no CSRF token on the events page")
			}
			resp, _ = withCookie(t, "POST", hs.URL+"/ui/logout", cs[0].Value, url.Values{"csrf": {m[1]}}, hdr)
			if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Secure != tc.secure {
				t.Errorf("logout: cookies %+v, want one cleared with Secure %v", cs, tc.secure)
			}
		})
	}
}

// TestConsoleSecureBehindLocalProxy: with serve's own wiring, a proxy on
// loopback in front of admin_listen (nginx ending TLS, say) is believed
// without trusted_proxies: its X-Forwarded-Proto https makes the cookie
// Secure.
func TestConsoleSecureBehindLocalProxy(t *testing.T) {
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	for _, proto := range []string{"https", "http"} {
		resp, _ := withCookie(t, "POST", a.admin+"/ui/login", "", url.Values{"token": {token}},
			http.Header{"X-Forwarded-Proto": {proto}})
		cs := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || cs[0].Secure != (proto == "https") {
			t.Errorf("login through a loopback proxy, X-Forwarded-Proto %s: %d, cookies %+v", proto, resp.StatusCode, cs)
		}
	}
}
