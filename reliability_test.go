package hookbox_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReliabilityNamesExist: every test RELIABILITY.md names as holding a
// promise exists: each Test, Fuzz, Example and Benchmark function, and
// each storetest case named after "storetest" (a case of the conformance
// suite, or a wildcard such as Session* for a family of them). A renamed
// or misspelt test would otherwise leave a promise pointing at nothing.
func TestReliabilityNamesExist(t *testing.T) {
	raw, err := os.ReadFile("RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	funcs, cases := codeNames(t)

	named := map[string]bool{}
	for _, name := range goTestName.FindAllString(doc, -1) {
		named[name] = true
		if !funcs[name] {
			t.Errorf("RELIABILITY.md names %s, which no Go file declares", name)
		}
	}
	listed := storetestNames(doc)
	for _, name := range listed {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			if !anyWithPrefix(cases, prefix) {
				t.Errorf("RELIABILITY.md names storetest %s, and no storetest case begins with %s", name, prefix)
			}
		} else if !cases[name] && !funcs[name] {
			t.Errorf("RELIABILITY.md names storetest %s, which is no storetest case", name)
		}
	}
	if len(named) < 100 || len(listed) < 40 {
		t.Fatalf("read %d test functions and %d storetest cases from RELIABILITY.md: the file was not read as expected", len(named), len(listed))
	}
}

// goTestName matches the name of a Go test, fuzz target, example or
// benchmark in prose.
var goTestName = regexp.MustCompile(`\b(?:Test|Fuzz|Example|Benchmark)[A-Z0-9_]\w*`)

// goFuncDecl matches a function declaration's name (methods included).
var goFuncDecl = regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?([A-Za-z_]\w*)`)

// caseKey matches a case of the storetest suite: a key of its maps of
// cases ("ClaimAndFinishDone": testClaimAndFinishDone), or a subtest.
var caseKey = regexp.MustCompile(`(?m)^\s*"([A-Z][A-Za-z0-9]*)":|t\.Run\("([A-Z][A-Za-z0-9]*)"`)

// codeNames returns every function declared in the module's Go files, and
// the names of package storetest's cases.
func codeNames(t *testing.T) (funcs, cases map[string]bool) {
	t.Helper()
	funcs, cases = map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range goFuncDecl.FindAllStringSubmatch(string(src), -1) {
			funcs[m[1]] = true
		}
		if filepath.Dir(path) == "storetest" {
			for _, m := range caseKey.FindAllStringSubmatch(string(src), -1) {
				cases[m[1]+m[2]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no storetest case found")
	}
	return funcs, cases
}

// storetestNames returns the names listed after each mention of storetest
// in doc: "`storetest` RunQueue: ClaimAndFinishDone, ExpiredLeaseIsReclaimed
// (what it shows), … and …". A list ends at a semicolon, at the end of a
// table cell, or at the first word that is not a name (prose, another
// package in backquotes, a Test function).
func storetestNames(doc string) []string {
	var names []string
	parts := strings.Split(doc, "storetest")
	for _, part := range parts[1:] {
		part = strings.TrimPrefix(part, "`")
		part = withoutParentheses(part)
		for _, word := range strings.FieldsFunc(part, func(r rune) bool { return r == ' ' || r == ',' || r == '\n' }) {
			if word == "and" || word == ":" {
				continue
			}
			word = strings.TrimSuffix(word, ":")
			name := strings.TrimRight(word, ";.|")
			if !caseName.MatchString(name) || goTestName.MatchString(name) {
				break
			}
			names = append(names, name)
			if name != word {
				break // the end of a clause or of a table cell
			}
		}
	}
	return names
}

// caseName matches a storetest case's name as the prose writes it, with a
// trailing * for every case that begins so.
var caseName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*\*?$`)

// withoutParentheses drops every parenthesised remark from s (they hold
// prose, not names), innermost first.
func withoutParentheses(s string) string {
	inner := regexp.MustCompile(`\([^()]*\)`)
	for {
		t := inner.ReplaceAllString(s, " ")
		if t == s {
			return s
		}
		s = t
	}
}

func anyWithPrefix(set map[string]bool, prefix string) bool {
	for name := range set {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
