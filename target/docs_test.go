package target_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/target"
)

// headerCell matches a header name, or a pattern of names with "*", in a
// code span of the README's table of forwarded headers.
var headerCell = regexp.MustCompile("`([A-Za-z][A-Za-z0-9*-]*)`")

// TestForwardedHeadersTable: what the README's table of forwarded headers
// says of each header it names is what ForwardHeader does with a sender's
// header of that name: a row that says "no" (or that hookbox sets it, so
// the sender's copy is dropped) names headers left out, a row that says
// "yes" or "as received" headers passed on. A name with "*" is tried
// with a word in its place.
func TestForwardedHeadersTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "| headers | forwarded? |")
	if !ok {
		t.Fatal("README has no table of forwarded headers")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var checked int
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 2 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		what, says := cells[0], strings.TrimSpace(cells[1])
		var dropped bool
		switch {
		case strings.HasPrefix(says, "no"), strings.HasPrefix(says, "set by hookbox"):
			dropped = true
		case strings.HasPrefix(says, "yes"), strings.HasPrefix(says, "as received"):
		default:
			t.Fatalf("README's row %q: cannot tell whether it says forwarded", line)
		}
		if strings.Contains(what, "`forward_headers`") || strings.Contains(what, "`token` source") {
			continue // set from the config, or dropped by the source's scheme: not the sender's headers alone
		}
		for _, m := range headerCell.FindAllStringSubmatch(what, -1) {
			name := strings.ReplaceAll(m[1], "*", "Foo")
			out := target.ForwardHeader(http.Header{http.CanonicalHeaderKey(name): {"v"}})
			checked++
			if got := len(out) == 0; got != dropped {
				t.Errorf("README says a sender's %s is %s; ForwardHeader forwards %v", m[1], says, out)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d headers of the README's table: it was not read as expected", checked)
	}
}

// hookboxVar matches a HOOKBOX_ variable's name.
var hookboxVar = regexp.MustCompile(`HOOKBOX_[A-Z_]+`)

// TestExecEnvironmentDocumented: the HOOKBOX_ variables an exec command
// of a named target gets are those the README's exec bullet lists, and
// HOOKBOX_TARGET, which the targets section names; none more, none less.
func TestExecEnvironmentDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, bullet, ok := strings.Cut(string(raw), "- **`exec: [argv…]`**")
	if !ok {
		t.Fatal("README has no exec bullet")
	}
	bullet, _, _ = strings.Cut(bullet, "How it ends")
	documented := map[string]bool{}
	for _, name := range hookboxVar.FindAllString(bullet, -1) {
		documented[name] = true
	}
	if !strings.Contains(string(raw), "(`HOOKBOX_TARGET` for exec)") {
		t.Error("README no longer says that a target's exec gets HOOKBOX_TARGET")
	}
	documented["HOOKBOX_TARGET"] = true

	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	sh := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(sh, []byte("#!/bin/sh\nenv > "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := target.NewExec(target.ExecOptions{Argv: []string{sh}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &hookbox.Event{ID: 7, Parent: 3, Source: "shop/deploy", Target: "deploy", DeliveryID: "d1", EventType: "push", Attempts: 1, Payload: []byte(`{}`)}
	if err := e.Deliver(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(string(env), "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, "HOOKBOX_") {
			got[name] = true
			if !documented[name] {
				t.Errorf("an exec command gets %s, which the README does not list", name)
			}
		}
	}
	for name := range documented {
		if !got[name] {
			t.Errorf("README lists %s, which an exec command does not get", name)
		}
	}
}
