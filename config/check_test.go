package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mask "github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/verify"
)

// TestMaskedLeavesTheConfigAlone: Effective and Masked work on copies:
// the config a service runs keeps its secrets, lists and maps.
func TestMaskedLeavesTheConfigAlone(t *testing.T) {
	c, err := Parse([]byte(`db: "postgres://u:db-secret-1@h/d"
admin_token: "admin-secret-1"
sources:
  - name: a
    scheme: github
    secrets: ["source-secret-1"]
    forward: "https://u:fwd-secret-1@app/x?k=q-secret-1"
    forward_headers: {X-Key: header-secret-1}
  - name: b
    scheme: github
    secrets: ["source-secret-2"]
    exec: ["true"]
    exec_env: ["K=env-secret-1"]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Effective().Masked()
	dump := func(c *Config) string {
		return strings.Join([]string{c.DB, c.AdminToken, c.Sources[0].Secrets[0], c.Sources[0].Forward,
			c.Sources[0].ForwardHeaders["X-Key"], c.Sources[1].Secrets[0], c.Sources[1].ExecEnv[0]}, " ")
	}
	if got, want := dump(c), "postgres://u:db-secret-1@h/d admin-secret-1 source-secret-1 https://u:fwd-secret-1@app/x?k=q-secret-1 header-secret-1 source-secret-2 K=env-secret-1"; got != want {
		t.Errorf("the original changed:\n got %s\nwant %s", got, want)
	}
	if got := dump(m); strings.Contains(got, "secret") {
		t.Errorf("masked copy shows a secret: %s", got)
	}
	if c.Sources[0].MaxAttempts != 0 || m.Sources[0].MaxAttempts != 20 || time.Duration(m.ShutdownTimeout) != DefaultShutdownTimeout {
		t.Errorf("defaults: original %d, effective %d, shutdown %v", c.Sources[0].MaxAttempts, m.Sources[0].MaxAttempts, m.ShutdownTimeout)
	}
}

// TestExecDirMustExist: an exec_dir that is not an existing directory, of
// a source or of a target, is refused by CheckExecDirs (what serve and
// config check run) with its key, what is wrong and what to do; a
// relative one is said to be taken from the working directory. Load does
// not refuse it: the other commands read the config from anywhere.
func TestExecDirMustExist(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	doc := func(sourceDir, targetDir string) string {
		return `
sources:
  - name: a
    scheme: none
    exec: ["/bin/cat"]
    exec_dir: "` + sourceDir + `"
  - name: b
    scheme: none
    targets:
      - name: t
        exec: ["/bin/cat"]
        exec_dir: "` + targetDir + `"
`
	}
	if cfg, err := Parse([]byte(doc(dir, dir))); err != nil || cfg.CheckExecDirs() != nil {
		t.Fatalf("existing exec_dir: %v", err)
	}
	for _, c := range []struct {
		source, target string
		want           []string
	}{
		{missing, dir, []string{"sources[0] (a).exec_dir: directory " + missing + " does not exist; create it"}},
		{dir, missing, []string{"sources[1] (b).targets[0].exec_dir: directory " + missing + " does not exist"}},
		{file, dir, []string{"sources[0] (a).exec_dir: " + file + " is not a directory"}},
		{"no-such-relative-dir", dir, []string{"sources[0] (a).exec_dir: directory no-such-relative-dir does not exist",
			"taken from the directory hookbox runs in, not the config file's"}},
	} {
		cfg, err := Parse([]byte(doc(c.source, c.target)))
		if err != nil {
			t.Fatalf("exec_dir %s / %s: Load refused it: %v", c.source, c.target, err)
		}
		err = cfg.CheckExecDirs()
		for _, want := range c.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("exec_dir %s / %s: error %v, want %q", c.source, c.target, err, want)
			}
		}
	}
}

// TestMaskedHidesValuesFromEnv: every value taken from the environment by
// ${...} is masked in what config check prints, wherever it is (an exec
// argument, a target's forward URL whose path is the credential, a match
// value written as one value or as a list), except listen, admin_listen
// and db, which are shown as serve uses them (db with its password
// masked). Values written in the file stay readable, and the original
// config keeps its values.
func TestMaskedHidesValuesFromEnv(t *testing.T) {
	t.Setenv("HB_APP_TOKEN", "app-token-from-env")
	t.Setenv("HB_SLACK_PATH", "T000/B000/slack-path-secret")
	t.Setenv("HB_REF", "match-ref-from-env")
	t.Setenv("HB_PORT", "8089")
	t.Setenv("HB_DB_PASSWORD", "db-password-from-env")
	c, err := Parse([]byte(`listen: ":${HB_PORT}"
db: "postgres://app:${HB_DB_PASSWORD}@db.example/hookbox"
sources:
  - name: a
    scheme: none
    exec: ["/usr/bin/curl", "-H", "Authorization: Bearer ${HB_APP_TOKEN}", "http://127.0.0.1:3000/a"]
  - name: b
    scheme: none
    targets:
      - name: slack
        forward: "https://hooks.slack.example/services/${HB_SLACK_PATH}"
        match: {ref: "${HB_REF}", repo: ["api", "${HB_REF}"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Masked()
	a, slack := m.Sources[0], m.Sources[1].Targets[0]
	if got := strings.Join(a.Exec, " "); got != "/usr/bin/curl -H "+mask.Mask+" http://127.0.0.1:3000/a" {
		t.Errorf("exec: %s", got)
	}
	if slack.Forward != mask.Mask || slack.Match["ref"][0] != mask.Mask || slack.Match["repo"][0] != "api" || slack.Match["repo"][1] != mask.Mask {
		t.Errorf("target: forward %s, match %v", slack.Forward, slack.Match)
	}
	if m.Listen != ":8089" || m.DB != "postgres://app:"+mask.Mask+"@db.example/hookbox" || a.Name != "a" {
		t.Errorf("listen %s, db %s, name %s", m.Listen, m.DB, a.Name)
	}
	orig := c.Sources[1].Targets[0]
	if c.Sources[0].Exec[2] != "Authorization: Bearer app-token-from-env" || orig.Match["ref"][0] != "match-ref-from-env" ||
		orig.Match["repo"][1] != "match-ref-from-env" || !strings.HasSuffix(orig.Forward, "slack-path-secret") {
		t.Errorf("the original changed: %v %v %s", c.Sources[0].Exec, orig.Match, orig.Forward)
	}
}

// TestIdenticalBodyNotes: allow_identical_bodies on a source whose
// signature covers no delivery id (github, twilio) is noted, with what it
// allows; on one whose signature covers the id (stripe), where it changes
// nothing, it is not.
func TestIdenticalBodyNotes(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: gh
    scheme: github
    secrets: ["0123456789abcdef0123"]
    allow_identical_bodies: true
    store_only: true
  - name: tw
    scheme: twilio
    secrets: ["0123456789abcdef0123"]
    public_url: "https://h.example/webhooks/tw"
    id_header: I-Twilio-Idempotency-Token
    allow_identical_bodies: true
  - name: st
    scheme: stripe
    secrets: ["whsec_0123456789abcdef0123"]
    allow_identical_bodies: true
`))
	if err != nil {
		t.Fatal(err)
	}
	ns := c.IdenticalBodyNotes()
	if len(ns) != 2 || !strings.HasPrefix(ns[0], "source gh has allow_identical_bodies: its signature does not cover the delivery id") ||
		!strings.HasPrefix(ns[1], "source tw has allow_identical_bodies") {
		t.Errorf("notes %q", ns)
	}
	if all := c.Notes(); len(all) != 3 {
		t.Errorf("Notes %q, want the store_only note and these two", all)
	}
}

// TestEffectiveFillsRejected: Effective, which config check prints as
// "defaults filled in", fills the rejected section with the defaults the
// recorder applies (it printed rejected: {}), and keeps what the file set.
func TestEffectiveFillsRejected(t *testing.T) {
	c, err := Parse([]byte("rejected: {burst: 5}\nsources:\n  - {name: a, scheme: github, secrets: [\"long-enough-secret\"], store_only: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Effective().Rejected
	want := Rejected{MaxCount: 10000, MaxAge: Duration(168 * time.Hour), MaxBodyBytes: 65536, Rate: 10, Burst: 5}
	if got != want {
		t.Errorf("Effective().Rejected = %+v, want %+v", got, want)
	}
	if c.Rejected != (Rejected{Burst: 5}) {
		t.Errorf("Effective changed the config: %+v", c.Rejected)
	}
}

// TestMaskedHidesPublicURLSecrets: config check masks the password and the
// query of a source's public_url written in the file (Twilio's may hold
// the user:password it sends with each request), as it masks those of a
// forward URL; it printed them.
func TestMaskedHidesPublicURLSecrets(t *testing.T) {
	c, err := Parse([]byte(`sources:
  - name: tw
    scheme: twilio
    secrets: ["0123456789abcdef0123"]
    public_url: "https://hooks:PublicPassXYZ@h.example/webhooks/tw?key=PublicQueryXYZ"
    id_header: I-Twilio-Idempotency-Token
    store_only: true
`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Masked().Sources[0].PublicURL
	if want := "https://hooks:" + mask.Mask + "@h.example/webhooks/tw?" + mask.Mask; got != want {
		t.Errorf("Masked public_url = %q, want %q", got, want)
	}
	if c.Sources[0].PublicURL == got {
		t.Error("Masked changed the original")
	}
}

// TestMaskedHidesForwardURLUserToken: config check masks the user name of
// a forward URL that has no password (https://TOKEN@host, a token the
// client sends as Basic "TOKEN:", and the forward target masks in its
// errors), of a source and of a target; it printed it. A user name with a
// password is shown, the password masked.
func TestMaskedHidesForwardURLUserToken(t *testing.T) {
	c, err := Parse([]byte(`sources:
  - name: a
    scheme: none
    forward: "https://user-token-111@app.example/hooks"
  - name: b
    scheme: none
    targets:
      - name: t
        forward: "https://user-token-222@app.example/hooks?k=v"
      - name: u
        forward: "https://deploy:pass-333@app.example/hooks"
`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Effective().Masked()
	got := []string{m.Sources[0].Forward, m.Sources[1].Targets[0].Forward, m.Sources[1].Targets[1].Forward}
	want := []string{
		"https://" + mask.Mask + "@app.example/hooks",
		"https://" + mask.Mask + "@app.example/hooks?" + mask.Mask,
		"https://deploy:" + mask.Mask + "@app.example/hooks",
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("masked forward %d = %q, want %q", i, got[i], want[i])
		}
	}
	if c.Sources[0].Forward != "https://user-token-111@app.example/hooks" {
		t.Error("Masked changed the original")
	}
}

// TestEffectiveFillsToleranceOfTimestampedSchemes: config check's
// effective config shows the default tolerance of every source that
// checks a signed timestamp (it showed one for standard-webhooks and
// stripe only, not for paddle, mailgun, or an hmac source with a
// timestamp_header such as a Slack preset), and none for a source that
// checks no timestamp.
func TestEffectiveFillsToleranceOfTimestampedSchemes(t *testing.T) {
	c, err := Parse([]byte(`sources:
  - {name: sw, scheme: standard-webhooks, secrets: ["whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="], store_only: true}
  - {name: stripe, scheme: stripe, secrets: ["whsec_long-enough-secret"], store_only: true}
  - {name: paddle, scheme: paddle, secrets: ["pdl_long-enough-secret"], store_only: true}
  - {name: mailgun, scheme: mailgun, secrets: ["long-enough-secret"], store_only: true}
  - {name: slack, provider: slack, secrets: ["long-enough-secret"], store_only: true}
  - name: webflow
    scheme: hmac
    header: X-Webflow-Signature
    timestamp_header: X-Webflow-Timestamp
    signed: "{timestamp}:{body}"
    id_field: id
    secrets: ["long-enough-secret"]
    store_only: true
  - {name: shopify, scheme: hmac, header: X-Shopify-Hmac-Sha256, encoding: base64, secrets: ["long-enough-secret"], store_only: true}
  - {name: github, scheme: github, secrets: ["long-enough-secret"], store_only: true}
  - {name: kept, scheme: stripe, tolerance: 2m, secrets: ["whsec_long-enough-secret"], store_only: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{
		"sw": verify.DefaultTolerance, "stripe": verify.DefaultTolerance, "paddle": verify.DefaultTolerance,
		"mailgun": verify.DefaultTolerance, "slack": verify.DefaultTolerance, "webflow": verify.DefaultTolerance,
		"shopify": 0, "github": 0, "kept": 2 * time.Minute,
	}
	for _, s := range c.Effective().Sources {
		if got := time.Duration(s.Tolerance); got != want[s.Name] {
			t.Errorf("source %s (%s): effective tolerance %v, want %v", s.Name, s.Scheme, got, want[s.Name])
		}
	}
}
