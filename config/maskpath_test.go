package config

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestMaskedForwardPathToken: a forward URL whose path is the
// credential (a Slack or Discord incoming webhook) is masked by
// Masked, what `hookbox config check` prints, as serve's errors mask it
// (target.urlSecrets, redact.SecretPathSegment) and as Masked already
// masks the same URL in an exec argument. It printed the token.
func TestMaskedForwardPathToken(t *testing.T) {
	const token = "abcdEFGHijklMNOPqrstUVWX"
	const discord = "Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE"
	c, err := Parse([]byte(`
sources:
  - name: polar
    scheme: none
    targets:
      - name: slack
        forward: "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/` + token + `"
      - name: discord
        forward: "https://discord.com/api/webhooks/123456789012345678/` + discord + `"
      - name: escaped
        forward: "https://app.example.com/a%2Fb/hooks/` + token + `?x=1"
      - name: notify
        exec: ["curl", "-d", "@-", "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/` + token + `"]
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(c.Masked())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{token, discord} {
		if strings.Contains(string(b), s) {
			t.Errorf("Masked shows the URL's path credential %q:\n%s", s, forwards(b))
		}
	}
	for _, want := range []string{
		"https://hooks.slack.com/services/T0123ABCD/B0123ABCD/[REDACTED]",
		"https://app.example.com/a%2Fb/hooks/[REDACTED]?[REDACTED]", // the other segments' escapes kept
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Masked does not show %s:\n%s", want, forwards(b))
		}
	}
}

// forwards is the forward lines of a printed config.
func forwards(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "://") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
