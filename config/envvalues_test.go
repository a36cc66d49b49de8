package config_test

import (
	"slices"
	"testing"

	"github.com/hookbox/hookbox/config"
)

// TestEnvValues: every value taken from the environment is listed, once,
// for the Redactor, except those found in a source's or target's name or
// the listen address, which logs show on purpose, and numbers, durations
// and addresses: masked wherever their text appears, they garbled logs
// ("[REDACTED]-stripe", "event_id=2[REDACTED]").
func TestEnvValues(t *testing.T) {
	t.Setenv("HOOKBOX_TEST_EV_TOKEN", "tok_live_in_an_exec_argument")
	t.Setenv("HOOKBOX_TEST_EV_NAME", "payments-prod")
	t.Setenv("HOOKBOX_TEST_EV_LISTEN", "127.0.0.1:18080")
	t.Setenv("HOOKBOX_TEST_EV_ENV", "production")
	t.Setenv("HOOKBOX_TEST_EV_LIMIT", "10485760")
	t.Setenv("HOOKBOX_TEST_EV_NET", "10.20.30.0/24")
	t.Setenv("HOOKBOX_TEST_EV_WAIT", "90s")
	cfg, err := config.Parse([]byte(`
listen: "${HOOKBOX_TEST_EV_LISTEN}"
max_body_bytes: ${HOOKBOX_TEST_EV_LIMIT}
sources:
  - name: "${HOOKBOX_TEST_EV_NAME}"
    scheme: none
    exec: ["curl", "-H", "Authorization: Bearer ${HOOKBOX_TEST_EV_TOKEN}", "${HOOKBOX_TEST_EV_TOKEN}"]
    allow_ips: ["${HOOKBOX_TEST_EV_NET}"]
    timeout: ${HOOKBOX_TEST_EV_WAIT}
  - name: "${HOOKBOX_TEST_EV_ENV}-stripe"
    scheme: none
    exec: ["true"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.EnvValues(); !slices.Equal(got, []string{"tok_live_in_an_exec_argument"}) {
		t.Errorf("EnvValues = %q, want only the token, once", got)
	}
}

// TestEnvValuesOfExecDirShown: a value from the environment used only as
// an exec_dir, a directory that a failed command's output names, is not
// listed for masking: it was, and "/srv/releases/current" read
// "[REDACTED]" in every error. The same value used also where a secret
// may go (an exec argument) is listed.
func TestEnvValuesOfExecDirShown(t *testing.T) {
	t.Setenv("HOOKBOX_TEST_EV_DIR", "/srv/releases/current")
	t.Setenv("HOOKBOX_TEST_EV_BOTH", "/srv/releases/and-an-argument")
	cfg, err := config.Parse([]byte(`
sources:
  - name: a
    scheme: none
    exec: ["true"]
    exec_dir: "${HOOKBOX_TEST_EV_DIR}"
  - name: b
    scheme: none
    targets:
      - name: t
        exec: ["true", "${HOOKBOX_TEST_EV_BOTH}"]
        exec_dir: "${HOOKBOX_TEST_EV_BOTH}"
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.EnvValues(); !slices.Equal(got, []string{"/srv/releases/and-an-argument"}) {
		t.Errorf("EnvValues = %q, want only the value also used in an argument", got)
	}
}

// TestExecEnvSecrets: an exec_env value is a secret unless it is a
// literal setting under a name that plainly holds one (APP_ENV, REGION)
// or a plain number; one from the environment, or holding a URL, is a
// secret whatever its name, and so is a literal under any other name
// (GITHUB_PAT, STRIPE_SK, JWT: a first version masked only names that
// said "secret", and showed these).
func TestExecEnvSecrets(t *testing.T) {
	t.Setenv("HOOKBOX_TEST_EV_STAGE", "staging-eu-west")
	cfg, err := config.Parse([]byte(`
sources:
  - name: a
    scheme: none
    exec: ["true"]
    exec_env:
      - APP_ENV=production
      - API_TOKEN=literal-token-value
      - stripe_api_key=sk_test_lowercase_name
      - DEPLOY_STAGE=${HOOKBOX_TEST_EV_STAGE}
      - UPSTREAM=https://user:pw@example.com/hook
      - DB_PASSWORD=
      - GITHUB_PAT=ghp_abcdefghijklmnop
      - STRIPE_SK=sk_live_abcdefghijk
      - JWT=eyJhbGciOiJIUzI1NiJ9
      - WORKERS=16
      - AUTH_MODE=bearer-only-mode
  - name: b
    scheme: none
    targets:
      - name: t
        exec: ["true"]
        exec_env: ["REGION=eu-west-1", "SIGNING_SECRET=target-literal-secret"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"literal-token-value", "sk_test_lowercase_name", "staging-eu-west", "https://user:pw@example.com/hook",
		"ghp_abcdefghijklmnop", "sk_live_abcdefghijk", "eyJhbGciOiJIUzI1NiJ9", "bearer-only-mode", "target-literal-secret"}
	if got := cfg.ExecEnvSecrets(); !slices.Equal(got, want) {
		t.Errorf("ExecEnvSecrets = %q, want %q", got, want)
	}
	// config check shows what serve's logs will: the settings, not the
	// secrets (it masked every value, settings too).
	env := cfg.Masked().Sources[0].ExecEnv
	if !slices.Contains(env, "APP_ENV=production") || !slices.Contains(env, "GITHUB_PAT=[REDACTED]") || slices.Contains(env, "JWT=eyJhbGciOiJIUzI1NiJ9") {
		t.Errorf("Masked exec_env = %q, want APP_ENV shown and GITHUB_PAT and JWT masked", env)
	}
	for name, setting := range map[string]bool{"APP_ENV": true, "node_env": true, "RELEASE_DIR": true, "REGION": true, "LOG_LEVEL": true,
		"DB_HOST": true, "LC_ALL": true, "AUTH_MODE": false, "GITHUB_PAT": false, "API": false, "SECRET_DIR": false, "STRIPE_SK": false} {
		if config.SettingEnvName(name) != setting {
			t.Errorf("SettingEnvName(%q) = %v, want %v", name, !setting, setting)
		}
	}
	for name, secret := range map[string]bool{"API_KEY": true, "GITHUB_TOKEN": true, "PGPASSWORD": true, "DATABASE_URL": true, "SENTRY_DSN": true,
		"AWS_SECRET_ACCESS_KEY": true, "oauth_client": true, "APP_ENV": false, "REGION": false, "LOG_LEVEL": false, "RELEASE_DIR": false} {
		if config.SecretEnvName(name) != secret {
			t.Errorf("SecretEnvName(%q) = %v, want %v", name, !secret, secret)
		}
	}
}
