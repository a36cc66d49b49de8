package config

import (
	"strings"
	"testing"
	"time"
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
	if c.Sources[0].MaxAttempts != 0 || m.Sources[0].MaxAttempts != 10 || time.Duration(m.ShutdownTimeout) != DefaultShutdownTimeout {
		t.Errorf("defaults: original %d, effective %d, shutdown %v", c.Sources[0].MaxAttempts, m.Sources[0].MaxAttempts, m.ShutdownTimeout)
	}
}
