package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestRetentionDaysCapped: a day count so large that it overflows a
// time.Duration (200000 days purged everything) is refused, naming the key.
func TestRetentionDaysCapped(t *testing.T) {
	for _, key := range []string{"retention_days", "payload_retention_days"} {
		for _, days := range []string{"36501", "106752", "200000"} {
			_, err := Parse([]byte(key + ": " + days + "\nsources:\n  - name: a\n    scheme: none\n"))
			if err == nil || !strings.Contains(err.Error(), key+":") || !strings.Contains(err.Error(), "36500") {
				t.Errorf("%s: %s: error = %v, want one naming the key and the limit", key, days, err)
			}
		}
		c, err := Parse([]byte(key + ": 36500\nsources:\n  - name: a\n    scheme: none\n"))
		if err != nil {
			t.Errorf("%s: 36500: %v", key, err)
		} else if c.RetentionDays+c.PayloadRetentionDays != MaxRetentionDays {
			t.Errorf("%s: 36500 read as %+v", key, c)
		}
	}
}

// TestUnknownKeysAllReported: every unknown key is reported, each with its
// line and the key it probably meant.
func TestUnknownKeysAllReported(t *testing.T) {
	_, err := Parse([]byte(`listen: ":8080"
retension_days: 30
sources:
  - name: a
    scheme: github
    secret: [x]
    max_atempts: 3
strict: true
`))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"retension_days (line 2): unknown key; did you mean retention_days?",
		"sources[0].secret (line 6): unknown key; did you mean secrets?",
		"sources[0].max_atempts (line 7): unknown key; did you mean max_attempts?",
		"strict (line 8): unknown key here; strict is a key of sources, so move it under sources:",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
}

// TestBadValuesNameTheKey: a value of the wrong type is reported with its
// key and line.
func TestBadValuesNameTheKey(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"sources:\n  - name: a\n    scheme: none\n    timeout: 30\n", "sources[0].timeout (line 4): not a duration"},
		{"shutdown_timeout: soon\nsources:\n  - name: a\n    scheme: none\n", "shutdown_timeout (line 1): not a duration"},
		{"retention_days: thirty\nsources:\n  - name: a\n    scheme: none\n", "retention_days (line 1): want a whole number"},
		{"sources:\n  - name: a\n    scheme: none\n    strict: maybe\n", "sources[0].strict (line 4): want true or false"},
		{"sources:\n  name: a\n", "sources (line 2): want a list"},
		{"sources:\n  - name: a\n    scheme: none\n    exec: ./run.sh\n", "sources[0].exec (line 4): want a list"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error = %v, want %q", c.doc, err, c.want)
		}
	}
}

// TestAliasBomb: merge keys that double at every level (2^30 mappings once
// expanded) are cut off with an error instead of taking forever.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {scheme: none}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("sources:\n  - <<: *m30\n    name: a\n")
	_, err := Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "once aliases are expanded") {
		t.Fatalf("error = %v", err)
	}
}
