package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestParentCommandsRefuseUnknownSubcommands runs every command that has
// subcommands with a misspelt one ("targets pase x") and wants an error, so
// a script does not take the printed help for a command that worked.
func TestParentCommandsRefuseUnknownSubcommands(t *testing.T) {
	var parents [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() {
			parents = append(parents, path)
		}
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRootCmd(), nil)
	if len(parents) < 2 {
		t.Fatalf("found only %d commands with subcommands: %v", len(parents), parents)
	}
	for _, path := range parents {
		args := append(append([]string(nil), path...), "lst", "x")
		_, _, err := runCLI(t, args...)
		if err == nil {
			t.Errorf("hookbox %s: exit 0, want an error", strings.Join(args, " "))
		}
	}
}
