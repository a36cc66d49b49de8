package config

import (
	"os"
	"path/filepath"
	"runtime"
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

// TestFileModeWarning: a config file that holds a secret and is readable
// by group or others is reported with the fix; one that is private, or
// whose secrets all come from the environment, is not. Nor is one whose
// only secrets are ${NAME:-default} defaults: those get the louder
// example-secret warning instead.
func TestFileModeWarning(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	t.Setenv("HB_SECRET", "from-env")
	literal := "sources:\n  - name: gh\n    scheme: github\n    secrets: [literal-secret]\n"
	fromEnv := "sources:\n  - name: gh\n    scheme: github\n    secrets: ['${HB_SECRET}']\n"
	token := "admin_token: literal-token\nsources:\n  - name: a\n    scheme: none\n"
	header := "sources:\n  - name: a\n    scheme: none\n    forward: http://127.0.0.1:3000\n    forward_headers:\n      X-App-Key: literal-secret\n"
	example := "sources:\n  - name: gh\n    scheme: github\n    secrets: ['${HB_UNSET_SECRET:-example}']\n"
	cases := []struct {
		doc  string
		mode os.FileMode
		warn bool
	}{
		{literal, 0o644, true},
		{literal, 0o640, true},
		{literal, 0o600, false},
		{literal, 0o400, false},
		{fromEnv, 0o644, false},
		{token, 0o604, true},
		{header, 0o644, true},
		{example, 0o644, false},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "hookbox.yaml")
		if err := os.WriteFile(path, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(cfg.Warnings, "\n")
		got := strings.Contains(all, "chmod 600 "+path)
		if got != c.warn {
			t.Errorf("mode %o, %q: warnings %q, want a chmod warning: %v", c.mode, c.doc, cfg.Warnings, c.warn)
		}
		if strings.Contains(all, "literal-secret") || strings.Contains(all, "literal-token") {
			t.Errorf("warning shows the secret: %q", all)
		}
	}
}

// TestEmptyAdminTokenWarning: an admin_token that is empty because its
// variable is set to nothing (no default) is reported, since it turns the
// admin API and the console off; an empty default (${NAME:-}), the
// example's way to say off, is not.
func TestEmptyAdminTokenWarning(t *testing.T) {
	t.Setenv("HB_ADMIN_EMPTY", "")
	for doc, want := range map[string]bool{
		`admin_token: "${HB_ADMIN_EMPTY}"`:   true,
		`admin_token: "${HB_ADMIN_EMPTY:-}"`: false,
		`admin_token: "${HB_ADMIN_UNSET:-}"`: false,
		`admin_token: "a-long-enough-token"`: false,
	} {
		c, err := Parse([]byte(doc + "\nsources:\n  - name: a\n    scheme: none\n    store_only: true\n"))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(c.Warnings, "\n"), "HB_ADMIN_EMPTY is set to nothing")
		if got != want {
			t.Errorf("%s: warned %v, want %v (warnings %q)", doc, got, want, c.Warnings)
		}
	}
}

// TestSecretsWithEdgeSpaceRefused: a secret or admin_token that starts or
// ends with white space (a file read into a variable keeps its newline)
// is refused, naming the key and never the value: HTTP trims header
// values, so such a token can never match, and a signing secret with a
// newline differs from the sender's, so every delivery would get 401.
func TestSecretsWithEdgeSpaceRefused(t *testing.T) {
	t.Setenv("HB_GH_SECRET", "gh-secret-abcdefgh1234\n")
	t.Setenv("HB_ADMIN", " admin-token-abcdefgh1234")
	t.Setenv("HB_SIGN", "whsec_c2VjcmV0c2VjcmV0c2VjcmV0\n")
	doc := `admin_token: "${HB_ADMIN}"
sources:
  - name: a
    scheme: github
    secrets: ["${HB_GH_SECRET}", "written-in-file  "]
    targets:
      - name: t
        forward: http://127.0.0.1:9/
        sign: {secret: "${HB_SIGN}"}
`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("secrets with a trailing newline or spaces loaded without an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"admin_token: starts with spaces",
		"sources[0] (a).secrets[0]: ends with a newline",
		"sources[0] (a).secrets[1]: ends with spaces",
		"sources[0] (a).targets[0].sign.secret: ends with a newline",
		"read from a file? strip it",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"gh-secret-abcdefgh1234", "admin-token-abcdefgh1234", "written-in-file", "c2VjcmV0c2VjcmV0"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error repeats a secret:\n%s", msg)
		}
	}
	// Spaces inside a secret are the secret's own.
	if _, err := Parse([]byte("sources:\n  - {name: a, scheme: github, secrets: [\"two words-abcdefgh\"], store_only: true}\n")); err != nil {
		t.Errorf("a secret with an inner space: %v", err)
	}
}
