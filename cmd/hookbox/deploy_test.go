package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitPath is the systemd unit shipped in deploy/.
const unitPath = "../../deploy/systemd/hookbox.service"

// TestSystemdUnit: the unit's commands are hookbox commands whose flags
// parse, it keeps the hardening the docs promise, and systemd-analyze
// (where installed) finds nothing wrong with it.
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	var commands int
	for _, line := range strings.Split(unit, "\n") {
		key, value, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(key, "Exec") {
			continue
		}
		args := strings.Fields(value)
		if len(args) < 2 || filepath.Base(args[0]) != "hookbox" {
			t.Fatalf("%s runs %q, not hookbox", key, value)
		}
		commands++
		root := newRootCmd()
		cmd, rest, err := root.Find(args[1:])
		if err != nil || cmd == root {
			t.Errorf("%s: %q is not a hookbox command: %v", key, value, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%s: %q: %v", key, value, err)
		} else if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%s: %q: %v", key, value, err)
		}
	}
	if commands < 1 {
		t.Fatalf("%d Exec lines", commands)
	}
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=hookbox", "NoNewPrivileges=yes",
		"ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n", "sqlite:/var/lib/hookbox/", "TimeoutStopSec="} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed; the unit's syntax was not checked by it")
	}
	// verify checks that ExecStart's binary exists: point it at this
	// test's own executable.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "hookbox.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(unit, "/usr/local/bin/hookbox ", self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
