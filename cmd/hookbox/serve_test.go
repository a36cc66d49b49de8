package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeLogsStartWarnings: serve logs the config's start-time warnings
// at WARN before anything else, here the example secret of a source whose
// variable is unset. The context is already cancelled, so serve stops as
// soon as it has started.
func TestServeLogsStartWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.yaml")
	doc := "sources:\n  - name: gh\n    scheme: github\n    secrets: ['${HB_SERVE_TEST_UNSET:-example-secret-value}']\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"serve", "--config", path, "--db", "sqlite:" + filepath.Join(dir, "hookbox.db"), "--listen", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = root.ExecuteContext(ctx)
	log := errOut.String()
	var warning string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "HB_SERVE_TEST_UNSET") {
			warning = line
		}
	}
	if warning == "" || !strings.Contains(warning, "gh") {
		t.Fatalf("no WARN line naming source gh and HB_SERVE_TEST_UNSET in the log:\n%s", log)
	}
	if strings.Contains(log, "example-secret-value") {
		t.Fatalf("the log shows the secret:\n%s", log)
	}
}
