package main

import (
	"strings"
	"testing"
)

// TestConfigCheckNamesDifferingInCase: config check passes a file whose
// sources, or one source's targets, differ only in case, and prints a
// warning naming both of each pair ("no warnings" before); --strict fails
// on it.
func TestConfigCheckNamesDifferingInCase(t *testing.T) {
	path := writeConfig(t, `sources:
  - {name: Stripe, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - {name: stripe, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - name: a
    scheme: none
    allow_ips: ["127.0.0.1"]
    targets:
      - {name: Billing, forward: "http://127.0.0.1:1/x"}
      - {name: billing, forward: "http://127.0.0.1:1/y"}
`)
	out := mustCLI(t, "config", "check", "--config", path)
	for _, want := range []string{
		"# 2 warnings:",
		"# warning: sources[0] (Stripe) and sources[1] (stripe) have names that differ only in case",
		"# warning: source a: targets[0] (Billing) and targets[1] (billing) have names that differ only in case",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runCLI(t, "config", "check", "--strict", "--config", path); err == nil || !strings.Contains(err.Error(), "2 warnings") {
		t.Errorf("--strict with the case warnings: err = %v", err)
	}
}
