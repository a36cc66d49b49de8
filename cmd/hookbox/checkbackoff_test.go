package main

import (
	"testing"

	"github.com/hookbox/hookbox/config"
)

// TestConfigCheckOutputLoadsLongBackoff: config check's output loads as a
// config (TestConfigCheckOutputLoads) also for a source whose backoff_min
// is above the default backoff_max: it printed backoff_max: 1h under
// backoff_min: 2h, which the loader refuses, and which is not what runs.
func TestConfigCheckOutputLoadsLongBackoff(t *testing.T) {
	path := writeConfig(t, `sources:
  - name: slow
    scheme: none
    forward: "http://127.0.0.1:9/hooks"
    backoff_min: 2h
`)
	out := mustCLI(t, "config", "check", "--config", path)
	if _, err := config.Parse([]byte(out)); err != nil {
		t.Fatalf("config check's output does not load: %v\n%s", err, out)
	}
}
