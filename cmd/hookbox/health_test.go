package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHealth: health exits 0 when /readyz (or /healthz with --live)
// answers 200 at the listen address, and fails on any other answer or
// when nothing listens.
func TestHealth(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz", r.URL.Path == "/readyz" && ready.Load():
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if out := mustCLI(t, "health", "--listen", addr); !strings.Contains(out, "/readyz: 200 OK") {
		t.Errorf("health printed %q", out)
	}
	ready.Store(false)
	if _, _, err := runCLI(t, "health", "--listen", addr); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("store not ready: err = %v", err)
	}
	if out := mustCLI(t, "health", "--listen", addr, "--live"); !strings.Contains(out, "/healthz: 200 OK") {
		t.Errorf("health --live printed %q", out)
	}
	if _, _, err := runCLI(t, "health", "--listen", closedAddr(t)); err == nil {
		t.Error("health passed with nothing listening")
	}
}
