package config_test

import (
	"slices"
	"testing"

	"github.com/hookbox/hookbox/config"
)

// TestEnvValues: every value taken from the environment is listed, once,
// for the Redactor, except those that are a source's or target's name or
// the listen address, which logs show on purpose.
func TestEnvValues(t *testing.T) {
	t.Setenv("HOOKBOX_TEST_EV_TOKEN", "tok_live_in_an_exec_argument")
	t.Setenv("HOOKBOX_TEST_EV_NAME", "payments-prod")
	t.Setenv("HOOKBOX_TEST_EV_LISTEN", "127.0.0.1:18080")
	cfg, err := config.Parse([]byte(`
listen: "${HOOKBOX_TEST_EV_LISTEN}"
sources:
  - name: "${HOOKBOX_TEST_EV_NAME}"
    scheme: none
    exec: ["curl", "-H", "Authorization: Bearer ${HOOKBOX_TEST_EV_TOKEN}", "${HOOKBOX_TEST_EV_TOKEN}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.EnvValues(); !slices.Equal(got, []string{"tok_live_in_an_exec_argument"}) {
		t.Errorf("EnvValues = %q, want only the token, once", got)
	}
}
