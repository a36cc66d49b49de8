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
