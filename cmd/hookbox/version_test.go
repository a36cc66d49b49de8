package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersionJSON: `hookbox version --json` prints one JSON object with
// the version, the Go version and the platform.
func TestVersionJSON(t *testing.T) {
	out := mustCLI(t, "version", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	want := map[string]string{"version": version, "go_version": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH}
	for k, w := range want {
		if got, _ := v[k].(string); got != w {
			t.Errorf("%s = %v, want %q (output %s)", k, v[k], w, out)
		}
	}
	if c, ok := v["commit"]; ok {
		if s, _ := c.(string); s == "" {
			t.Errorf("commit present but empty: %s", out)
		}
	}
	plain := mustCLI(t, "version")
	if !strings.HasPrefix(plain, "hookbox "+version) {
		t.Errorf("version printed %q", plain)
	}
}
