package ui_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

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
}
