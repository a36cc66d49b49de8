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
// loads as 10; and a tab inside an unquoted value was dropped ("a<TAB>b"
// loaded as "ab": config check printed a tab so, and its output loaded
// back changed). Each is now refused, saying what to write, and no message
// repeats the value (found by a helper's review, session 44).
func TestYAMLTrapsRefusedWithoutEcho(t *testing.T) {
	const secret = "Xk9vQ2rT8mLp4sWz"
	const src = "sources: [{name: a, scheme: none, allow_ips: [127.0.0.1], store_only: true}]\n"
	for _, c := range []struct{ yaml, want string }{
		{"admin_token: *" + secret + "\n" + src, "a value starting with '*' is a YAML alias"},
		{"admin_token: &" + secret + "\n" + src, "a value starting with '&' is a YAML anchor"},
		{"sources:\n  - {name: a, scheme: none, allow_ips: [127.0.0.1], store_only: true, max_attempts: 010}\n", "leading 0 reads as octal"},
		{"sources:\n  - name: a\n    scheme: none\n    allow_ips: [127.0.0.1]\n    exec:\n      - /bin/echo\n      - a\t" + secret + "\n", "a tab inside an unquoted value"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q: %v; want an error saying %q, without the value", c.yaml, err, c.want)
		}
	}
	// A tab in the white space of a value folded onto a second line is
	// no tab of the value (a review of the first version of the check).
	c, err := Parse([]byte("sources:\n  - name: a\n    scheme: none\n    allow_ips: [127.0.0.1]\n    exec:\n      - /bin/sh\n      - -c\n      - deploy.sh --env production\n        \t--verbose\n"))
	if err != nil || c.Sources[0].Exec[2] != "deploy.sh --env production --verbose" {
		t.Errorf("a folded value whose second line has a tab before it: %v", err)
	}
	// Still read as before: quoted values, a tab among them, and a real
	// alias.
	c, err = Parse([]byte("x-defaults: &d 7\nadmin_token: \"*" + secret + "\"\nsources: [{name: a, scheme: none, allow_ips: [127.0.0.1], exec: [cut, \"-d\\t\"], max_attempts: *d}]\n"))
	if err != nil || c.AdminToken != "*"+secret || c.Sources[0].MaxAttempts != 7 || c.Sources[0].Exec[1] != "-d\t" {
		t.Errorf("quoted token and tab, and a real alias: %v", err)
	}
}
