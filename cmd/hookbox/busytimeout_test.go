package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeWarnsLowBusyTimeout: a sqlite.busy_timeout under 100ms is
// logged at WARN when serve starts and printed by config check (which
// --strict fails on); with --db naming PostgreSQL, where the key does
// nothing, config check prints no such warning.
func TestServeWarnsLowBusyTimeout(t *testing.T) {
	doc := `sqlite:
  busy_timeout: 5ms
sources:
  - name: kept
    scheme: github
    secrets: ["long-enough-secret"]
    store_only: true
`
	const warning = "sqlite.busy_timeout is 5ms: whenever another process holds SQLite's write lock longer than that"
	if logLine(serveLog(t, doc), "level=WARN", warning, "set it to at least 100ms") == "" {
		t.Errorf("serve logs no WARN about busy_timeout 5ms")
	}
	path := writeConfig(t, doc)
	out, _, err := runCLI(t, "config", "check", "--strict", "--config", path, "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	if err == nil || !strings.Contains(out, "# warning: "+warning) {
		t.Errorf("config check --strict: %v\n%s", err, out)
	}
	out = mustCLI(t, "config", "check", "--strict", "--config", path, "--db", "postgres://u@127.0.0.1:1/none")
	if strings.Contains(out, "busy_timeout is") {
		t.Errorf("config check warns about busy_timeout on PostgreSQL:\n%s", out)
	}
}
