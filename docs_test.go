package hookbox_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// markdownLink matches a Markdown link's target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading matches a Markdown heading.
var heading = regexp.MustCompile(`(?m)^#+ (.+)$`)

// slug is GitHub's anchor for a heading: lower case, punctuation but
// hyphens dropped, spaces as hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of the Markdown file at path.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(raw), -1) {
		out[slug(m[1])] = true
	}
	return out
}

// TestDocLinksResolve: every relative link of the README, the deploy
// guide and the examples' READMEs names a file or directory of the
// repository, and every #anchor a heading of the page it points into, so
// an operator following one lands where it says.
func TestDocLinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "README.md", filepath.Join("docs", "deploy.md"))
	var checked int
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(raw), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(link, "#")
			target := doc
			if file != "" {
				target = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", doc, link)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s links to %s: an anchor in a file that is not Markdown", doc, link)
			} else if !anchors(t, target)[anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", doc, link, target)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links: the docs were not read as expected", checked)
	}
}
