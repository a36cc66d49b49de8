package target_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
