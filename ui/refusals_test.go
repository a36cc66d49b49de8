package ui_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/ui"
)

// TestConsoleRefusalsLogOncePerMinute: wrong Bearer tokens and failed
// logins, however many, make one warning a minute each (the rest go to
// debug): whoever sends them chooses how many there are.
func TestConsoleRefusalsLogOncePerMinute(t *testing.T) {
	var buf bytes.Buffer
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: dbtest.Open(t, dbtest.SQLiteURL(t)), Sources: []string{"polar"},
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	for range 100 {
		rec := httptest.NewRecorder()
		req := mustRequest(t, "GET", "/ui/events")
		req.Header.Set("Authorization", "Bearer wrong-token")
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d, want 401", rec.Code)
		}
		rec = httptest.NewRecorder()
		req = httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {"wrong-token"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong login: %d, want 401", rec.Code)
		}
	}
	for _, msg := range []string{"ui request refused: wrong token", "ui login refused"} {
		if n := strings.Count(buf.String(), msg); n != 1 {
			t.Errorf("%d lines %q for 100 refusals, want 1", n, msg)
		}
	}
}

// TestConsoleGuessesLimited: wrong tokens at the login form and as Bearer
// count together against one allowance per client, shared with the admin
// API: past it, the login form answers 429 (saying when to retry) even to
// the right token, and so does a Bearer request; another client logs in.
func TestConsoleGuessesLimited(t *testing.T) {
	srv := server.New(server.Config{})
	guesses := server.NewAuthLimiter(nil)
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}, Guesses: guesses})
	server.RegisterAdmin(srv, server.AdminConfig{Token: token, Store: st, Guesses: guesses})
	login := func(from, tok string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = from + ":4000"
		srv.ServeHTTP(rec, req)
		return rec
	}
	bearer := func(from, path, tok string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.RemoteAddr = from + ":4000"
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	const a, b = "203.0.113.5", "203.0.113.6"
	for i := range server.AuthBurst {
		var code int
		switch i % 3 {
		case 0:
			code = login(a, "wrong").Code
		case 1:
			code = bearer(a, "/ui/events", "wrong")
		default:
			code = bearer(a, "/admin/events", "wrong")
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	rec := login(a, token)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "too many wrong admin tokens") {
		t.Fatalf("login past the allowance: %d, Retry-After %q; want 429 saying why", rec.Code, rec.Header().Get("Retry-After"))
	}
	if code := bearer(a, "/ui/events", token); code != http.StatusTooManyRequests {
		t.Fatalf("Bearer past the allowance: %d, want 429", code)
	}
	if rec := login(b, token); rec.Code != http.StatusSeeOther {
		t.Fatalf("another client's login: %d, want 303", rec.Code)
	}
	// What a browser sends over plain HTTP to an address that is not
	// localhost, with the console's Referrer-Policy: no Sec-Fetch-Site,
	// Origin null. Behind a proxy that rewrites Host, Origin would not
	// match it either: neither is held against the login.
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null")
	req.Host = "hookbox.internal:9090"
	req.RemoteAddr = "203.0.113.9:4000"
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a plain-HTTP browser login: %d, want 303", rec.Code)
	}
}

// TestBasicAuthIsNoGuess: behind a proxy with its own Basic login, a
// browser sends "Authorization: Basic …" with every request. The console
// took each for a wrong admin token: every page was 401 despite a valid
// session cookie, and after 10 requests the operator's address got 429
// for everything. Now the console lets the cookie decide, and the admin
// API answers 401 without spending a guess.
func TestBasicAuthIsNoGuess(t *testing.T) {
	srv := server.New(server.Config{})
	guesses := server.NewAuthLimiter(nil)
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"}, Guesses: guesses})
	server.RegisterAdmin(srv, server.AdminConfig{Token: token, Store: st, Guesses: guesses})
	const from = "203.0.113.7:4000"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:proxy-password"))
	serve := func(method, path string, body io.Reader, set func(*http.Request)) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, body)
		req.RemoteAddr = from
		req.Header.Set("Authorization", basic)
		set(req)
		srv.ServeHTTP(rec, req)
		return rec
	}
	login := serve("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()), func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	})
	cookies := login.Result().Cookies()
	if login.Code != http.StatusSeeOther || len(cookies) == 0 {
		t.Fatalf("login through the proxy: %d, %d cookies; want 303 and a session", login.Code, len(cookies))
	}
	for i := range 3 * server.AuthBurst {
		rec := serve("GET", "/ui/events", nil, func(r *http.Request) {
			for _, c := range cookies {
				r.AddCookie(c)
			}
		})
		if rec.Code != http.StatusOK {
			t.Fatalf("console page %d with the session and the proxy's Basic header: %d, want 200", i+1, rec.Code)
		}
		if rec := serve("GET", "/admin/events", nil, func(*http.Request) {}); rec.Code != http.StatusUnauthorized {
			t.Fatalf("admin API call %d with only the proxy's Basic header: %d, want 401", i+1, rec.Code)
		}
	}
	rec := serve("GET", "/admin/events", nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })
	if rec.Code != http.StatusOK {
		t.Fatalf("the admin token from the same address afterwards: %d, want 200 (no guess spent)", rec.Code)
	}
}

// forgedCookie is a session cookie made as the console makes them, but
// with a guessed token: its key derives from the token. Made with the
// right token, it is signed but names no session the store knows.
func forgedCookie(guess string, exp time.Time) *http.Cookie {
	key := sha256.Sum256([]byte("hookbox ui key\x00" + guess))
	const id = "FORGEDSESSIONID"
	e := strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("session\x00" + id + "\x00" + e))
	return &http.Cookie{Name: "hookbox_session", Value: id + "." + e + "." + hex.EncodeToString(m.Sum(nil))}
}

// guessConsole registers a console with a guess limiter on a new server
// and returns a function that serves a request from client address addr,
// and one that makes a login request with a token.
func guessConsole(t *testing.T, addr string) (do func(*http.Request) *httptest.ResponseRecorder, loginReq func(string) *http.Request) {
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: dbtest.Open(t, dbtest.SQLiteURL(t)), Sources: []string{"polar"},
		Guesses: server.NewAuthLimiter(nil)})
	do = func(req *http.Request) *httptest.ResponseRecorder {
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	loginReq = func(tok string) *http.Request {
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}
	return do, loginReq
}

// TestConsoleCookieGuessesLimited: a session cookie signed with a guessed
// token tests that guess, so it spends one like a wrong token does (and
// is cleared); past the allowance such a cookie, and the right token at
// the login form, get 429. A login posted from another site is refused
// before it spends anything, and an empty token costs nothing.
func TestConsoleCookieGuessesLimited(t *testing.T) {
	do, loginReq := guessConsole(t, "203.0.113.7:4000")
	for range 20 {
		if rec := do(loginReq("")); rec.Code != http.StatusUnauthorized {
			t.Fatalf("empty token: %d, want 401", rec.Code)
		}
	}
	cross := loginReq("wrong")
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	if rec := do(cross); rec.Code != http.StatusForbidden {
		t.Fatalf("login posted from another site: %d, want 403", rec.Code)
	}
	for i := range server.AuthBurst {
		req := httptest.NewRequest("GET", "/ui/events", nil)
		req.AddCookie(forgedCookie(fmt.Sprint("guess-", i), time.Now().Add(time.Hour)))
		rec := do(req)
		if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("forged cookie %d: %d, Set-Cookie %q; want the login redirect and the cookie cleared", i+1, rec.Code, rec.Header().Get("Set-Cookie"))
		}
	}
	req := httptest.NewRequest("GET", "/ui/events", nil)
	req.AddCookie(forgedCookie(token, time.Now().Add(time.Hour)))
	if rec := do(req); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a cookie signed with the right token, past the allowance: %d, want 429", rec.Code)
	}
	if rec := do(loginReq(token)); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("login past the allowance: %d, want 429", rec.Code)
	}
}

// TestConsoleTossedCookie: session cookies of the same name that a
// sibling domain set beside the console's own (sent first), one signed
// with another token and one with the right token but no session, neither
// end the operator's session nor spend its guesses.
func TestConsoleTossedCookie(t *testing.T) {
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: dbtest.Open(t, dbtest.SQLiteURL(t)), Sources: []string{"polar"},
		Guesses: server.NewAuthLimiter(nil)})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	srv.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", rec.Code, cookies)
	}
	for i := range 3 * server.AuthBurst {
		req := httptest.NewRequest("GET", "/ui/events", nil)
		req.RemoteAddr = "203.0.113.8:4000"
		req.AddCookie(forgedCookie("tossed-by-a-sibling", time.Now().Add(time.Hour)))
		req.AddCookie(forgedCookie(token, time.Now().Add(time.Hour)))
		req.AddCookie(cookies[0])
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d with a tossed cookie before the session's: %d, want 200", i+1, rec.Code)
		}
	}
}

// TestConsoleCookieBatchSpendsAGuessEach: each session cookie signed with
// a guessed token tests that guess, but a request spent one guess whatever
// the number of its cookies, and gave it back when any was signed with
// the right token: one client tested 500 candidate tokens with the
// allowance of 10 and was not even out of guesses after. A request
// without a live session now spends a guess for each of its cookies.
func TestConsoleCookieBatchSpendsAGuessEach(t *testing.T) {
	serve, _ := guessConsole(t, "203.0.113.77:4000")
	do := func(req *http.Request) int { return serve(req).Code }
	exp := time.Now().Add(time.Hour)
	batches := 0
	for ; batches < server.AuthBurst; batches++ {
		req := httptest.NewRequest("GET", "/ui/events", nil)
		for i := range 3 {
			req.AddCookie(forgedCookie(fmt.Sprintf("candidate-%d-%d", batches, i), exp))
		}
		if do(req) == http.StatusTooManyRequests {
			break
		}
	}
	if batches != server.AuthBurst/3 {
		t.Errorf("batches of 3 forged cookies answered before 429: %d, want %d (a guess each)", batches, server.AuthBurst/3)
	}
	req := httptest.NewRequest("GET", "/ui/events", nil)
	req.AddCookie(forgedCookie(token, exp))
	if code := do(req); code != http.StatusTooManyRequests {
		t.Errorf("a cookie signed with the right token, the guesses spent: %d, want 429", code)
	}

	// A batch that holds a cookie signed with the right token, but no
	// live session, is answered and charged as one that does not: the
	// first version of the fix spent a guess for it and gave it back, so
	// the answer told whether the batch held the token, for free.
	batch := func(addr string, withRight bool) int {
		serve, _ := guessConsole(t, addr)
		req := httptest.NewRequest("GET", "/ui/events", nil)
		for i := range 5 * server.AuthBurst {
			guess := fmt.Sprintf("candidate-%d", i)
			if withRight && i == 37 {
				guess = token
			}
			req.AddCookie(forgedCookie(guess, exp))
		}
		return serve(req).Code
	}
	if without, with := batch("203.0.113.90:4000", false), batch("203.0.113.91:4000", true); without != http.StatusTooManyRequests || with != without {
		t.Errorf("a batch of %d candidate cookies with %d guesses: %d without the right token, %d with it; want 429 for both",
			5*server.AuthBurst, server.AuthBurst, without, with)
	}
}

// TestConsoleTossedCookiesCostNothing: the operator's session is found
// behind any number of cookies of the same name that sibling domains set,
// and they cost its address no guess: with one guess left, a request
// with the session and a tossed cookie is admitted, and so is the next.
// (A review of the first version of TestConsoleCookieBatchSpendsAGuessEach's
// fix: it read four cookies at most, so a fifth, the console's own, was
// cleared, and it spent a guess for each cookie before it knew one was
// valid.)
func TestConsoleTossedCookiesCostNothing(t *testing.T) {
	do, loginReq := guessConsole(t, "203.0.113.10:4000")
	rec := do(loginReq(token))
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", rec.Code, cookies)
	}
	exp := time.Now().Add(time.Hour)
	req := httptest.NewRequest("GET", "/ui/events", nil)
	for i := range 8 {
		req.AddCookie(forgedCookie(fmt.Sprint("sibling-", i), exp))
	}
	req.AddCookie(cookies[0])
	if rec := do(req); rec.Code != http.StatusOK || rec.Header().Get("Set-Cookie") != "" {
		t.Errorf("the session behind eight tossed cookies: %d, Set-Cookie %q; want 200 and the cookie kept", rec.Code, rec.Header().Get("Set-Cookie"))
	}
	for i := range server.AuthBurst - 1 {
		if rec := do(loginReq(fmt.Sprint("typo-", i))); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, rec.Code)
		}
	}
	for i := range 2 {
		req := httptest.NewRequest("GET", "/ui/events", nil)
		req.AddCookie(forgedCookie("tossed-by-a-sibling", exp))
		req.AddCookie(cookies[0])
		if rec := do(req); rec.Code != http.StatusOK {
			t.Errorf("request %d of the session with a tossed cookie, one guess left: %d, want 200", i+1, rec.Code)
		}
	}
}
