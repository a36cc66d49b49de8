package config

import (
	"strings"
	"testing"
)

// TestYAMLTrapsRefusedWithoutEcho: values YAML reads otherwise than they
// are written. An unquoted value that starts with '*' (a generated
// token) is an alias, and the error quoted its name, the rest of the
// secret; one that starts with '&' is an anchor with no value, and
// admin_token loaded as empty, the admin API off, without a word; and
// max_attempts: 010 loaded as 8 (YAML 1.1's octal) where ${N} with N=010
// loads as 10. Each is now refused, saying what to write, and no message
// repeats the value (found by a helper's review, session 44).
func TestYAMLTrapsRefusedWithoutEcho(t *testing.T) {
	const secret = "Xk9vQ2rT8mLp4sWz"
	const src = "sources: [{name: a, scheme: none, allow_ips: [127.0.0.1], store_only: true}]\n"
	for _, c := range []struct{ yaml, want string }{
		{"admin_token: *" + secret + "\n" + src, "a value starting with '*' is a YAML alias"},
		{"admin_token: &" + secret + "\n" + src, "a value starting with '&' is a YAML anchor"},
		{"sources:\n  - {name: a, scheme: none, allow_ips: [127.0.0.1], store_only: true, max_attempts: 010}\n", "leading 0 reads as octal"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q: %v; want an error saying %q, without the value", c.yaml, err, c.want)
		}
	}
	// Still read as before: a quoted value, a real alias, 0 and 10.
	c, err := Parse([]byte("x-defaults: &d 7\nadmin_token: \"*" + secret + "\"\nsources: [{name: a, scheme: none, allow_ips: [127.0.0.1], store_only: true, max_attempts: *d}]\n"))
	if err != nil || c.AdminToken != "*"+secret || c.Sources[0].MaxAttempts != 7 {
		t.Errorf("quoted token and a real alias: %v", err)
	}
}
