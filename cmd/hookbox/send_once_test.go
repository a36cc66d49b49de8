package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSendRefusedSaidOnce: with nothing listening, send printed
// "error: connection refused: …" on stdout and "hookbox is not running
// at …" on stderr for the one failure; it says it once.
func TestSendRefusedSaidOnce(t *testing.T) {
	addr := closedAddr(t)
	code, out, errOut := runExit(t, "send", "--scheme", "none", "--listen", addr, "--timeout", "5s")
	if code != 1 || strings.TrimSpace(out) != "" || strings.Count(errOut, "connection refused") != 1 ||
		!strings.Contains(errOut, "hookbox is not running at "+addr) {
		t.Errorf("exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
	// --json still gives each copy's error as data.
	code, out, _ = runExit(t, "send", "--scheme", "none", "--listen", addr, "--timeout", "5s", "--json", "--copies", "2")
	var replies []sendReply
	if code != 1 || json.Unmarshal([]byte(out), &replies) != nil || len(replies) != 2 || replies[1].Error == "" {
		t.Errorf("--json: exit %d %q", code, out)
	}
}
