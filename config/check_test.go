package config

import (
	"os"
	"path/filepath"
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

// TestExecDirMustExist: an exec_dir that is not an existing directory, of
// a source or of a target, is refused at load with its key, what is
// wrong and what to do; a relative one is said to be taken from the
// working directory. An existing directory loads.
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
	if _, err := Parse([]byte(doc(dir, dir))); err != nil {
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
		_, err := Parse([]byte(doc(c.source, c.target)))
		for _, want := range c.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("exec_dir %s / %s: error %v, want %q", c.source, c.target, err, want)
			}
		}
	}
}
