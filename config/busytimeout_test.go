package config

import (
	"strings"
	"testing"
)

// TestLowBusyTimeoutWarns: a sqlite.busy_timeout set under 100ms on a
// SQLite database is a start warning that says what it risks (503s at
// ingest while another process writes) and what to set; 100ms and more,
// the default (unset) and a PostgreSQL database get none. A value of a
// few milliseconds loaded without a word before.
func TestLowBusyTimeoutWarns(t *testing.T) {
	for _, c := range []struct {
		db, busy string
		warns    bool
	}{
		{"", "5ms", true},
		{"sqlite:hookbox.db", "99ms", true},
		{"sqlite:hookbox.db", "1ms", true},
		{"sqlite:hookbox.db", "100ms", false},
		{"sqlite:hookbox.db", "500ms", false},
		{"sqlite:hookbox.db", "", false},
		{"postgres://u@localhost/db", "5ms", false},
	} {
		doc := "sources:\n  - {name: a, scheme: github, secrets: [\"long-enough-secret\"], store_only: true}\n"
		if c.db != "" {
			doc += "db: " + c.db + "\n"
		}
		if c.busy != "" {
			doc += "sqlite:\n  busy_timeout: " + c.busy + "\n"
		}
		cfg, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("db %q, busy_timeout %q: %v", c.db, c.busy, err)
		}
		ws := cfg.StoreWarnings()
		if !c.warns {
			if len(ws) != 0 {
				t.Errorf("db %q, busy_timeout %q: warnings %q, want none", c.db, c.busy, ws)
			}
			continue
		}
		if len(ws) != 1 {
			t.Fatalf("db %q, busy_timeout %q: warnings %q, want 1", c.db, c.busy, ws)
		}
		for _, want := range []string{"sqlite.busy_timeout is " + c.busy, "deliveries are answered 503", "hookbox purge, replay or events skip", "set it to at least 100ms"} {
			if !strings.Contains(ws[0], want) {
				t.Errorf("busy_timeout %q: the warning lacks %q: %s", c.busy, want, ws[0])
			}
		}
	}
}
