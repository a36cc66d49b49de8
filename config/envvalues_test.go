package config_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/config"
	mask "github.com/hookbox/hookbox/redact"
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

// TestDefaultsMaskedAsEnvValues: a ${NAME:-default} default used in place
// of an unset variable is masked as a value from the environment would
// be, where such values are masked: listed by EnvValues (an exec
// argument, a forward URL's path), masked by Masked, and an exec_env value
// written with one is masked whatever its name. Where a value from the
// environment is shown (a name, listen, a number), so is a default.
func TestDefaultsMaskedAsEnvValues(t *testing.T) {
	for _, name := range []string{"HB_DEF_ARG", "HB_DEF_FWD", "HB_DEF_ENV", "HB_DEF_NAME", "HB_DEF_LISTEN", "HB_DEF_DAYS"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	cfg, err := config.Parse([]byte(`
listen: "${HB_DEF_LISTEN:-127.0.0.1:18081}"
retention_days: ${HB_DEF_DAYS:-30}
sources:
  - name: "${HB_DEF_NAME:-payments-default}"
    scheme: none
    exec: ["deploy", "${HB_DEF_ARG:-default-arg-secret}"]
    exec_env: ["APP_ENV=${HB_DEF_ENV:-default-env-secret}"]
  - name: b
    scheme: none
    forward: "http://127.0.0.1:9/hooks/${HB_DEF_FWD:-default-path-secret}"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"default-arg-secret", "default-env-secret", "default-path-secret"}
	if got := cfg.EnvValues(); !slices.Equal(got, want) {
		t.Errorf("EnvValues = %q, want %q", got, want)
	}
	if got := cfg.ExecEnvSecrets(); !slices.Equal(got, []string{"default-env-secret"}) {
		t.Errorf("ExecEnvSecrets = %q, want the default", got)
	}
	m := cfg.Masked()
	if got := m.Sources[0].Exec; !slices.Equal(got, []string{"deploy", mask.Mask}) {
		t.Errorf("Masked exec = %q", got)
	}
	if got := m.Sources[0].ExecEnv; !slices.Equal(got, []string{"APP_ENV=" + mask.Mask}) {
		t.Errorf("Masked exec_env = %q", got)
	}
	if got := m.Sources[1].Forward; got != mask.Mask {
		t.Errorf("Masked forward = %q", got)
	}
	if m.Listen != "127.0.0.1:18081" || m.RetentionDays != 30 {
		t.Errorf("Masked listen %q, retention_days %d: want them shown", m.Listen, m.RetentionDays)
	}
}

// TestExecArgSecrets: credentials written literally in exec arguments
// (a URL's password, curl's -u user:password, --token=, --password X, a
// query token, a flag in a shell script) are listed for the Redactor and
// masked by Masked, which shows the rest of each argument; a command
// without credentials is shown as written.
func TestExecArgSecrets(t *testing.T) {
	cfg, err := config.Parse([]byte(`
sources:
  - name: a
    scheme: none
    exec: ["curl", "-u", "admin:hunter2-long", "https://api.example.com/x?api_key=query-key-123&page=20"]
  - name: b
    scheme: none
    targets:
      - name: db
        exec: ["psql", "postgres://app:pg-pass-word@db/app", "--token=tok-abcdef12", "--password", "pw-abcdef12"]
      - name: sh
        exec: ["/bin/sh", "-c", "deploy --api-key script-key-123 --env production"]
      - name: plain
        exec: ["./scripts/deploy.sh", "--env", "production"]
`))
	if err != nil {
		t.Fatal(err)
	}
	secrets := cfg.ExecArgSecrets()
	for _, want := range []string{"hunter2-long", "query-key-123", "pg-pass-word", "tok-abcdef12", "pw-abcdef12", "script-key-123"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("ExecArgSecrets = %q, want %q in it", secrets, want)
		}
	}
	for _, shown := range []string{"admin", "production", "./scripts/deploy.sh", "https://api.example.com/x"} {
		if slices.Contains(secrets, shown) {
			t.Errorf("ExecArgSecrets = %q, want %q left out", secrets, shown)
		}
	}
	m := cfg.Masked()
	wants := [][]string{
		{"curl", "-u", "admin:" + mask.Mask, "https://api.example.com/x?api_key=" + mask.Mask + "&page=20"},
		{"psql", "postgres://app:" + mask.Mask + "@db/app", "--token=" + mask.Mask, "--password", mask.Mask},
		{"/bin/sh", "-c", "deploy --api-key " + mask.Mask + " --env production"},
		{"./scripts/deploy.sh", "--env", "production"},
	}
	gots := [][]string{m.Sources[0].Exec, m.Sources[1].Targets[0].Exec, m.Sources[1].Targets[1].Exec, m.Sources[1].Targets[2].Exec}
	for i := range wants {
		if !slices.Equal(gots[i], wants[i]) {
			t.Errorf("Masked exec = %q, want %q", gots[i], wants[i])
		}
	}
	if cfg.Sources[0].Exec[2] != "admin:hunter2-long" {
		t.Errorf("Masked changed the config's own exec: %q", cfg.Sources[0].Exec)
	}
}

// TestNumericExecEnvSecretMasked: an exec_env value under a name that
// says it holds a secret is masked even when it reads as a number:
// API_SECRET=83748271938475629384 was shown by config check (Masked) and
// left out of the redactor's secrets, as APP_PORT=8080 still is (found by
// a helper's review, session 44).
func TestNumericExecEnvSecretMasked(t *testing.T) {
	c, err := config.Parse([]byte("sources:\n  - {name: a, scheme: none, allow_ips: [127.0.0.1], exec: [/bin/true], exec_env: [\"API_SECRET=83748271938475629384\", \"APP_PORT=8080\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(c.Masked().Sources[0].ExecEnv, " ")
	if strings.Contains(env, "83748271938475629384") || !strings.Contains(env, "APP_PORT=8080") {
		t.Errorf("Masked exec_env = %q, want API_SECRET masked and APP_PORT shown", env)
	}
}
