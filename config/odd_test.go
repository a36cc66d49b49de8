package config

import (
	"strings"
	"testing"
)

// TestOddKeysRefusedOrWarned: options that cannot work are errors, and
// options that do nothing or work against another are warnings; before,
// each loaded without a word. Errors: a forward URL whose port is not
// one (99999), a tolerance under a second, a sqlite: URL with a query
// string (it would create a file named with the query). Warnings:
// exec_env (or exec_dir) on a source or target with no exec, a
// payload_retention_days not shorter than retention_days, a tolerance
// under 30s.
func TestOddKeysRefusedOrWarned(t *testing.T) {
	_, err := Parse([]byte(`db: "sqlite:x.db?_pragma=busy_timeout(1)"
sources:
  - name: a
    scheme: stripe
    secrets: ["whsec_long-enough-secret"]
    tolerance: 1ms
    forward: "http://127.0.0.1:99999/hook?token=abcdefghijkl"
  - name: b
    scheme: github
    secrets: ["long-enough-secret"]
    targets:
      - {name: t, forward: "https://app.example.com:/x"}
`))
	if err == nil {
		t.Fatal("loaded without an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"db: sqlite: takes no query string",
		"sources[0] (a).forward: has a port that is not a number from 1 to 65535",
		"sources[0] (a).tolerance: is under a second",
		"sources[1] (b).targets[0].forward: has a colon after the host but no port",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "abcdefghijkl") || strings.Contains(msg, "busy_timeout") {
		t.Errorf("error repeats a URL:\n%s", msg)
	}

	c, err := Parse([]byte(`retention_days: 30
payload_retention_days: 60
sources:
  - name: a
    scheme: stripe
    secrets: ["whsec_long-enough-secret"]
    tolerance: 5s
    forward: "http://127.0.0.1:8080/hook"
    exec_env: ["TOKEN=abc"]
  - name: b
    scheme: github
    secrets: ["long-enough-secret"]
    targets:
      - {name: t, forward: "https://app.example.com/x", exec_dir: /tmp}
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := strings.Join(c.Warnings, "\n")
	for _, want := range []string{
		"retention_days 30 is not longer than payload_retention_days 60: events are deleted before their payloads would be cleared",
		"source a has a tolerance of 5s",
		"source a sets exec_env but has no exec command",
		"source b, target t sets exec_dir but has no exec command",
	} {
		if !strings.Contains(ws, want) {
			t.Errorf("warnings lack %q:\n%s", want, ws)
		}
	}
	if len(c.Warnings) != 4 {
		t.Errorf("%d warnings, want 4:\n%s", len(c.Warnings), ws)
	}

	// What is meant stays quiet: a real port, a file name, payloads
	// cleared before events, a tolerance of minutes.
	c, err = Parse([]byte(`db: "sqlite:data/hook?box.db"
retention_days: 30
payload_retention_days: 7
sources:
  - name: a
    scheme: stripe
    secrets: ["whsec_long-enough-secret"]
    tolerance: 2m
    forward: "https://[::1]:8443/hook"
`))
	if err != nil || len(c.Warnings) != 0 {
		t.Errorf("a sound config: %v, warnings %q", err, c.Warnings)
	}
}
