package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/server"
)

// docFiles are the documents an operator acts on, from this directory.
var docFiles = []string{
	"../../README.md",
	"../../docs/deploy.md",
	"../../examples/deploy/README.md",
	"../../examples/licences/README.md",
	"../../examples/subscriptions/README.md",
	"../../deploy/prometheus/hookbox-alerts.yml",
}

// inlineCode is a Markdown code span.
var inlineCode = regexp.MustCompile("`([^`\n]+)`")

// docCode returns the code of a document: each fenced block's lines (a
// line ending in a backslash joined to the next) and each code span of
// the prose. A YAML file (the alert rules) is code throughout.
func docCode(text string, markdown bool) []string {
	var code []string
	fenced, joined := !markdown, ""
	for _, line := range strings.Split(text, "\n") {
		if markdown && strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				code = append(code, m[1])
			}
			continue
		}
		if strings.HasSuffix(line, `\`) {
			joined += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		code = append(code, joined+line)
		joined = ""
	}
	return code
}

// documentedCommand is one hookbox command line a document gives.
type documentedCommand struct {
	file, line string
	words      []string // after "hookbox", up to the end of the command
}

// documentedCommands finds every hookbox command line in the documents
// and in the examples of every command's --help: a word "hookbox" (or a
// path ending in /hookbox, as in go run ./cmd/hookbox) followed by the
// name of one of root's commands, up to the end of that shell command.
func documentedCommands(t *testing.T, root *cobra.Command) []documentedCommand {
	t.Helper()
	names := map[string]bool{}
	for _, c := range root.Commands() {
		names[c.Name()] = true
	}
	var found []documentedCommand
	for _, f := range docFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range docCode(string(raw), strings.HasSuffix(f, ".md")) {
			found = append(found, commandsIn(filepath.Base(f), line, names)...)
		}
	}
	// The examples of every command's --help are read as a document too.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			found = append(found, commandsIn(c.CommandPath()+" --help", line, names)...)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return found
}

// commandsIn returns the hookbox commands in one line of code.
func commandsIn(file, line string, names map[string]bool) []documentedCommand {
	var found []documentedCommand
	words := strings.Fields(line)
	for i := 0; i+1 < len(words); i++ {
		if filepath.Base(words[i]) != "hookbox" || !names[words[i+1]] {
			continue
		}
		var cmd []string
		for _, w := range words[i+1:] {
			if w == "|" || w == "&&" || w == "||" || w == ";" || strings.HasPrefix(w, "#") || w == "2>&1" || w == ">" {
				break
			}
			end := strings.ContainsAny(w, ");'")
			cmd = append(cmd, strings.TrimRight(w, ");'"))
			if end {
				break
			}
		}
		found = append(found, documentedCommand{file: file, line: line, words: cmd})
	}
	return found
}

// TestDocumentedCommandsExist: every hookbox command the README, the
// deploy guide, the examples, the alert rules and the --help examples
// give is a command of the CLI, and every flag they give it is one of its flags, so an
// operator who types it does not meet "unknown flag".
func TestDocumentedCommandsExist(t *testing.T) {
	var checked int
	for _, d := range documentedCommands(t, newRootCmd()) {
		root := newRootCmd()
		cmd, _, err := root.Find(d.words)
		if err != nil || cmd == root {
			t.Errorf("%s: %q: not a hookbox command: %v", d.file, d.line, err)
			continue
		}
		for _, w := range d.words {
			w = strings.Trim(w, "[]")
			name, _, _ := strings.Cut(w, "=")
			var flag bool
			switch {
			case strings.HasPrefix(name, "--") && len(name) > 2:
				flag = cmd.Flags().Lookup(name[2:]) != nil || cmd.InheritedFlags().Lookup(name[2:]) != nil
			case strings.HasPrefix(name, "-") && len(name) == 2:
				flag = cmd.Flags().ShorthandLookup(name[1:]) != nil || cmd.InheritedFlags().ShorthandLookup(name[1:]) != nil
			default:
				continue
			}
			if !flag {
				t.Errorf("%s: %q: %s has no flag %s", d.file, d.line, cmd.CommandPath(), name)
			}
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("found %d documented commands; the extraction is broken", checked)
	}
}

// TestExampleConfigsPassConfigCheck: every example config the docs point
// at is one `hookbox config check` passes, run as the docs run it, from
// the repository's root (an example's exec path is relative to it).
func TestExampleConfigsPassConfigCheck(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	t.Setenv("HOOKBOX_DB", "")
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := filepath.Glob(filepath.Join("examples", "*", "hookbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, nested...)
	if len(files) < 4 {
		t.Fatalf("found %d example configs: %q", len(files), files)
	}
	for _, f := range files {
		out, errOut, err := runCLI(t, "config", "check", "--config", f)
		if err != nil || !strings.Contains(out, f+" is valid") {
			t.Errorf("hookbox config check --config %s: %v\n%s%s", f, err, out, errOut)
		}
	}
}

// longFlag matches a flag named in prose.
var longFlag = regexp.MustCompile(`(?:^|[\s(\[,"])--([a-z][a-z0-9-]+)`)

// TestHelpNamesRealFlags: every --flag the --help texts name is a flag:
// of the command itself, or (where the text speaks of another command,
// as retire's of purge --include-dead) of some hookbox command.
func TestHelpNamesRealFlags(t *testing.T) {
	root := newRootCmd()
	var commands []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		commands = append(commands, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	exists := func(name string) bool {
		for _, c := range commands {
			if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
				return true
			}
		}
		return false
	}
	var named int
	for _, c := range commands {
		text := c.Short + "\n" + c.Long + "\n" + c.Flags().FlagUsages()
		for _, m := range longFlag.FindAllStringSubmatch(text, -1) {
			named++
			if !exists(m[1]) {
				t.Errorf("%s --help names --%s, which no hookbox command has", c.CommandPath(), m[1])
			}
		}
	}
	if named < 30 {
		t.Fatalf("the --help texts name %d flags: they were not read as expected", named)
	}
}

// TestEventsShowHelpNamesEveryField: events show --help names each field
// of the JSON it prints (server.EventDetail, walked by its json tags), so
// a script's author sees deliveries and held_by, not only the first three.
func TestEventsShowHelpNamesEveryField(t *testing.T) {
	cmd, _, err := newRootCmd().Find([]string{"events", "show"})
	if err != nil {
		t.Fatal(err)
	}
	detail := reflect.TypeOf(server.EventDetail{})
	for i := 0; i < detail.NumField(); i++ {
		name, _, _ := strings.Cut(detail.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if !strings.Contains(cmd.Long, `"`+name+`"`) {
			t.Errorf("events show --help does not name the JSON field %q", name)
		}
	}
}
