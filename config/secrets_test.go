package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A live-looking secret with the characters that broke the old text
// expansion: a double quote, a backslash, a colon and a hash.
const liveSecret = `whsec_live"quote\back:colon #hash`

// TestSecretNotInParseErrors: a typo next to secrets: used to print the
// source line after expansion, and with it the secret.
func TestSecretNotInParseErrors(t *testing.T) {
	t.Setenv("HB_LIVE_SECRET", liveSecret)
	for _, doc := range []string{
		// A YAML syntax error on the secret's line.
		"sources:\n  - name: stripe\n    scheme: stripe\n    secrets: [\"${HB_LIVE_SECRET}\"\n",
		// An unknown key next to the secret.
		"sources:\n  - name: stripe\n    scheme: stripe\n    secrets: [\"${HB_LIVE_SECRET}\"]\n    secretz: x\n",
		// The secret where a number belongs.
		"sources:\n  - name: stripe\n    scheme: stripe\n    max_attempts: \"${HB_LIVE_SECRET}\"\n    secrets: [x]\n",
		// The secret where a duration belongs.
		"sources:\n  - name: stripe\n    scheme: stripe\n    timeout: ${HB_LIVE_SECRET}\n    secrets: [x]\n",
		// The secret as a scheme name, which verify would quote back.
		"sources:\n  - name: stripe\n    scheme: ${HB_LIVE_SECRET}\n    secrets: [x]\n",
		// The secret as a log level.
		"log:\n  level: ${HB_LIVE_SECRET}\nsources:\n  - name: a\n    scheme: none\n",
	} {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("%q: no error", doc)
			continue
		}
		if leaks(err.Error(), liveSecret) {
			t.Errorf("%q: error shows the secret:\n%s", doc, err)
		}
	}
}

// leaks reports whether msg contains secret, as is or quoted, or its
// longest unbroken piece.
func leaks(msg, secret string) bool {
	if strings.Contains(msg, secret) || strings.Contains(msg, strings.Trim(strconv.Quote(secret), `"`)) {
		return true
	}
	return strings.Contains(msg, "whsec_live")
}

// TestSecretKeptExactly: quotes and backslashes in an environment value
// reach the config unchanged, whatever the YAML quoting around ${...}.
func TestSecretKeptExactly(t *testing.T) {
	t.Setenv("HB_LIVE_SECRET", liveSecret)
	for _, ref := range []string{`"${HB_LIVE_SECRET}"`, `'${HB_LIVE_SECRET}'`, `${HB_LIVE_SECRET}`} {
		c, err := Parse([]byte("sources:\n  - name: s\n    scheme: github\n    secrets:\n      - " + ref + "\n"))
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if got := c.Sources[0].Secrets[0]; got != liveSecret {
			t.Errorf("%s: secret = %q, want %q", ref, got, liveSecret)
		}
	}
}

// TestCommentsNotExpanded: a ${VAR} in a comment is text, not a reference.
func TestCommentsNotExpanded(t *testing.T) {
	c, err := Parse([]byte("# set ${HB_SURELY_UNSET} for real use\nsources:\n  - name: a # ${HB_SURELY_UNSET_TOO}\n    scheme: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Name != "a" {
		t.Fatalf("source = %+v", c.Sources[0])
	}
}

// TestUnsetVariableNamed: an unset variable without a default is an error
// that names the variable and the key.
func TestUnsetVariableNamed(t *testing.T) {
	_, err := Parse([]byte("sources:\n  - name: a\n    scheme: github\n    secrets: ['${HB_SURELY_UNSET}']\n"))
	if err == nil || !strings.Contains(err.Error(), "HB_SURELY_UNSET") || !strings.Contains(err.Error(), "sources[0].secrets[0]") {
		t.Fatalf("error = %v, want one naming HB_SURELY_UNSET and sources[0].secrets[0]", err)
	}
}

// TestNumbersFromEnvironment: ${...} works for numbers, booleans and
// durations too, since it is expanded before the value is typed.
func TestNumbersFromEnvironment(t *testing.T) {
	t.Setenv("HB_DAYS", "14")
	c, err := Parse([]byte("retention_days: ${HB_DAYS}\npayload_retention_days: ${HB_PAYLOAD_DAYS:-7}\nsources:\n  - name: a\n    scheme: none\n    strict: ${HB_STRICT:-true}\n    timeout: ${HB_TIMEOUT:-3s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RetentionDays != 14 || c.PayloadRetentionDays != 7 || !c.Sources[0].Strict || c.Sources[0].Policy().Timeout.String() != "3s" {
		t.Fatalf("config = %+v", c)
	}
}

// TestExampleSecretWarnings: a secret that came from a ${VAR:-default}
// default is reported by source, with the variable to set; one from the
// environment is not.
func TestExampleSecretWarnings(t *testing.T) {
	t.Setenv("HB_POLAR", "whsec_c2VjcmV0")
	c, err := Parse([]byte(`
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["${HB_POLAR:-whsec_ZXhhbXBsZQ==}"]
  - name: stripe
    scheme: stripe
    secrets: ["${HB_STRIPE_UNSET:-whsec_example}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", c.Warnings)
	}
	w := c.Warnings[0]
	if !strings.Contains(w, "stripe") || !strings.Contains(w, "HB_STRIPE_UNSET") || strings.Contains(w, "whsec_example") {
		t.Fatalf("warning = %q", w)
	}
}

// TestExampleConfigIsLoud: the README's example runs on a fresh machine,
// listens on loopback only, and names every source that runs on an example
// secret; someone who sets only POLAR_WEBHOOK_SECRET is told about the
// other three.
func TestExampleConfigIsLoud(t *testing.T) {
	for _, v := range []string{"STRIPE_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET", "SHOPIFY_WEBHOOK_SECRET", "HOOKBOX_ADMIN_TOKEN"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("POLAR_WEBHOOK_SECRET", "whsec_c2VjcmV0")
	c, err := Load(filepath.Join("..", "examples", "hookbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Listen, "127.0.0.1:") {
		t.Errorf("listen = %q, want loopback only", c.Listen)
	}
	all := strings.Join(c.Warnings, "\n")
	for _, want := range []string{"stripe", "STRIPE_WEBHOOK_SECRET", "github", "GITHUB_WEBHOOK_SECRET", "shopify", "SHOPIFY_WEBHOOK_SECRET"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings do not name %s:\n%s", want, all)
		}
	}
	if strings.Contains(all, "polar") || strings.Contains(all, "POLAR") {
		t.Errorf("warnings name polar, whose secret is set:\n%s", all)
	}
}
