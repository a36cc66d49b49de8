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
