package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/hookbox/hookbox/verify"
)

// operatorDocs is what an operator reads to write a config: the README,
// the deploy guide and the example configs.
func operatorDocs(t *testing.T) string {
	t.Helper()
	files := []string{filepath.Join("..", "README.md"), filepath.Join("..", "docs", "deploy.md")}
	examples, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := filepath.Glob(filepath.Join("..", "examples", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range append(append(files, examples...), nested...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteString("\n")
	}
	return all.String()
}

// configKey is one key the loader accepts, as the docs write it: a
// top-level key or a dotted path below one ("rejected.max_age"), or a key
// of a source or a target, which the docs name by itself ("max_attempts")
// or below one ("sign.secret").
type configKey struct {
	path string
	// item: a key of a list's items (a source's, a target's), which the
	// docs may write as its last element alone.
	item bool
}

// configKeys walks t's yaml tags.
func configKeys(t reflect.Type, prefix string, item bool) []configKey {
	var keys []configKey
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		keys = append(keys, configKey{path: path, item: item})
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration(0)):
			keys = append(keys, configKeys(ft, path+".", item)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft.Elem(), "", true)...)
		}
	}
	return keys
}

// documented reports whether docs name the key: in a code span ("`key`",
// "`key:", "`key.") or as a YAML key ("key:") in an example, for a
// source's or a target's key by its last element too.
func documented(docs string, k configKey) bool {
	names := []string{k.path}
	if k.item {
		if i := strings.LastIndex(k.path, "."); i >= 0 {
			names = append(names, k.path[i+1:])
		}
	}
	for _, n := range names {
		q := regexp.QuoteMeta(n)
		if regexp.MustCompile("`" + q + "[`:. ]|(?m)^[ \t-]*" + q + ":|\\{[^}\n]*[{ ,]" + q + ":").MatchString(docs) {
			return true
		}
	}
	return false
}

// TestEveryConfigKeyDocumented: each key the loader accepts (walked from
// Config's yaml tags, so a new key is checked the day it is added) is
// named where an operator looks: the README, docs/deploy.md or an
// example config. Top-level sections' keys must be written whole
// ("ingest.flushers"), as the README's table of keys writes them.
func TestEveryConfigKeyDocumented(t *testing.T) {
	docs := operatorDocs(t)
	keys := configKeys(reflect.TypeOf(Config{}), "", false)
	if len(keys) < 60 {
		t.Fatalf("walked %d keys; the walk is broken", len(keys))
	}
	for _, k := range keys {
		if !documented(docs, k) {
			t.Errorf("config key %s is accepted but documented nowhere an operator looks (README.md, docs/deploy.md, examples/)", k.path)
		}
	}
}

// configTable returns the rows of the README's table of keys (under
// "## Configuration"): each row's cells.
func configTable(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Configuration\n")
	if !ok {
		t.Fatal("README has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") && !strings.HasPrefix(line, "| source") && !strings.HasPrefix(line, "| target") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 3 {
			t.Fatalf("README config row with %d cells: %s", len(cells), line)
		}
		rows = append(rows, cells)
	}
	if len(rows) < 20 {
		t.Fatalf("found %d rows in the README's table of keys; the parse is broken", len(rows))
	}
	return rows
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans returns the code spans of s.
func spans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestConfigTableKeysExist: every key the README's table of keys names is
// one the loader accepts, at the level the row says (a source's or a
// target's key when the row says "source" or "target").
func TestConfigTableKeysExist(t *testing.T) {
	top, source, target := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, k := range configKeys(reflect.TypeOf(Config{}), "", false) {
		if !k.item {
			top[k.path] = true
		}
	}
	for _, k := range configKeys(reflect.TypeOf(Source{}), "", false) {
		source[k.path] = true
	}
	for _, k := range configKeys(reflect.TypeOf(Target{}), "", false) {
		target[k.path] = true
	}
	for _, row := range configTable(t) {
		cell := strings.TrimSpace(row[0])
		for _, key := range spans(cell) {
			switch {
			case strings.HasPrefix(cell, "source or target"):
				if !source[key] || !target[key] {
					t.Errorf("README's table of keys: %q is not a key of both sources and targets", key)
				}
			case strings.HasPrefix(cell, "source"):
				if !source[key] {
					t.Errorf("README's table of keys: %q is not a source key", key)
				}
			case strings.HasPrefix(cell, "target"):
				if !target[key] {
					t.Errorf("README's table of keys: %q is not a target key", key)
				}
			default:
				if !top[key] {
					t.Errorf("README's table of keys: %q is not a key of the file", key)
				}
			}
		}
	}
}

// effectiveValues flattens the configuration serve runs for a minimal
// file (one forward source) to dotted keys; a source's keys are under
// "source.".
func effectiveValues(t *testing.T) map[string]string {
	t.Helper()
	c, err := Parse([]byte("sources:\n  - name: a\n    scheme: github\n    secrets: [\"a-long-enough-secret\"]\n    forward: http://127.0.0.1:3000/hooks\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(c.Effective())
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(out, &tree); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	var flatten func(prefix string, m map[string]any)
	flatten = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case map[string]any:
				flatten(prefix+k+".", v)
			case []any:
				if k == "sources" {
					flatten("source.", v[0].(map[string]any))
				}
			default:
				values[prefix+k] = fmt.Sprint(v)
			}
		}
	}
	flatten("", tree)
	return values
}

// sameValue compares a default as the docs write it with the one the
// configuration holds: numbers as numbers (10 and 10.0), durations as
// durations (1h and 60m), other values as text.
func sameValue(doc, got string) bool {
	if doc == got {
		return true
	}
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(got)
		return err == nil && a == b
	}
	if a, err := strconv.ParseFloat(doc, 64); err == nil {
		b, err := strconv.ParseFloat(got, 64)
		return err == nil && a == b
	}
	return false
}

// TestDocumentedDefaults: the defaults the README states, in its table of
// keys and in its list of per-source defaults, are those serve runs with
// (Effective, what config check prints). A row whose default is not a
// single value per key (prose, "0 (off)", "none") is left to its words.
func TestDocumentedDefaults(t *testing.T) {
	values := effectiveValues(t)
	var checked int
	check := func(where, key, doc string) {
		got, ok := values[key]
		if !ok || got == "" { // left to serve (listen: its --listen)
			return
		}
		checked++
		if !sameValue(doc, got) {
			t.Errorf("README (%s): %s defaults to %q; serve runs with %q", where, key, doc, got)
		}
	}
	for _, row := range configTable(t) {
		keys, defaults := spans(row[0]), spans(strings.SplitN(row[1], ", or", 2)[0])
		if len(keys) != len(defaults) {
			continue
		}
		prefix := ""
		if strings.HasPrefix(strings.TrimSpace(row[0]), "source") {
			prefix = "source."
		}
		for i, k := range keys {
			check("table of keys", prefix+k, defaults[i])
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, perSource, ok := strings.Cut(string(raw), "\nPer source: ")
	if !ok {
		t.Fatal(`README has no "Per source:" paragraph of defaults`)
	}
	perSource, _, _ = strings.Cut(perSource, "\n\n")
	for _, m := range regexp.MustCompile("`([a-z_]+)`[^`(]*\\(([^)]+)\\)").FindAllStringSubmatch(perSource, -1) {
		check("per source", "source."+m[1], m[2])
	}
	if checked < 20 {
		t.Fatalf("checked %d defaults; the parse is broken", checked)
	}
}

// TestDocumentedBodyDedupeSchemes: the schemes the README's row for
// allow_identical_bodies and the deploy guide's account of what a payload
// clear keeps say are deduplicated by body are those DedupesByBody says.
func TestDocumentedBodyDedupeSchemes(t *testing.T) {
	var want []string
	for _, scheme := range verify.Schemes {
		if (Source{Scheme: scheme}).DedupesByBody() {
			want = append(want, scheme)
		}
	}
	slices.Sort(want)
	schemes := map[string]bool{}
	for _, s := range verify.Schemes {
		schemes[s] = true
	}
	named := func(text string) []string {
		var got []string
		for _, s := range spans(text) {
			if schemes[s] && !slices.Contains(got, s) {
				got = append(got, s)
			}
		}
		slices.Sort(got)
		return got
	}
	var row string
	for _, r := range configTable(t) {
		if strings.Contains(r[0], "`allow_identical_bodies`") {
			row = r[2]
		}
	}
	if got := named(row); !slices.Equal(got, want) {
		t.Errorf("README's row for allow_identical_bodies names %q; the sources that dedupe by body are %q", got, want)
	}
	raw, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sentence, ok := strings.Cut(string(raw), "SHA-256 of the body (")
	if !ok {
		t.Fatal("docs/deploy.md no longer says which sources keep the SHA-256 of the body")
	}
	sentence, _, _ = strings.Cut(sentence, ")")
	if got := named(sentence); !slices.Equal(got, want) {
		t.Errorf("docs/deploy.md says the sources %q keep the SHA-256 of the body; those that dedupe by body are %q", got, want)
	}
}

// yamlBlock matches a fenced YAML block of a Markdown document.
var yamlBlock = regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```")

// envReference matches a ${NAME} or ${NAME:-default} of a config.
var envReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// TestDocumentedConfigBlocksLoad: every YAML block of the README, the
// deploy guide and the examples' READMEs that is a config, or a source
// of one, loads as written, with each variable it names set: an operator
// may paste it.
func TestDocumentedConfigBlocksLoad(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("..", "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "README.md"), filepath.Join("..", "docs", "deploy.md"))
	var loaded int
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(raw), -1) {
			block := m[1]
			switch {
			case strings.HasPrefix(block, "  - name:"):
				block = "sources:\n" + block // a source, as its list item
			case !strings.Contains(block, "\nsources:\n") && !strings.HasPrefix(block, "sources:\n"):
				continue // not hookbox's config (a scrape config, say)
			}
			t.Run(fmt.Sprintf("%s#%d", filepath.Base(doc), loaded), func(t *testing.T) {
				for _, v := range envReference.FindAllStringSubmatch(block, -1) {
					// A Standard Webhooks secret, which every scheme takes.
					t.Setenv(v[1], "whsec_ZXhhbXBsZS1zZWNyZXQtZm9yLWRvY3MtdGVzdHM=")
				}
				if _, err := Parse([]byte(block)); err != nil {
					t.Errorf("%s: the block does not load: %v\n%s", doc, err, block)
				}
			})
			loaded++
		}
	}
	if loaded < 4 {
		t.Fatalf("%d config blocks found: the docs were not read as expected", loaded)
	}
}

// TestDocumentedPlainSettingNames: the README's list of exec_env names
// whose literal values are shown (not masked) is settingName's, name for
// name: each exact name, each prefix and each suffix.
func TestDocumentedPlainSettingNames(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(raw), "plainly holds one: a name among ")
	if !ok {
		t.Fatal("README no longer lists the exec_env names whose values are shown")
	}
	para, _, _ = strings.Cut(para, "that\ndoes not also say")
	documented := map[string]bool{}
	for _, s := range spans(para) {
		documented[s] = true
	}
	// settingName is ^(A|B…)$|_(C|D…)$|^LC_: exact names, suffixes (with
	// their underscore) and prefixes.
	parts := strings.Split(settingName.String(), "|^")
	var want []string
	for _, part := range strings.Split(parts[0], ")$|") {
		part = strings.TrimSuffix(part, ")$")
		switch {
		case strings.HasPrefix(part, "^("):
			want = append(want, strings.Split(part[2:], "|")...)
		case strings.HasPrefix(part, "_("):
			for _, s := range strings.Split(part[2:], "|") {
				want = append(want, "_"+s)
			}
		}
	}
	want = append(want, parts[1:]...)
	if len(want) < 20 {
		t.Fatalf("read %d names from settingName %s", len(want), settingName)
	}
	for _, w := range want {
		if !documented[w] {
			t.Errorf("README's list of plain exec_env names lacks %s, which settingName shows", w)
		}
		delete(documented, w)
	}
	for d := range documented {
		t.Errorf("README's list of plain exec_env names has %s, which settingName does not show", d)
	}
}
