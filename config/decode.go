package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// decoder fills a Config from the YAML syntax tree of the raw file. The file
// is parsed before anything is expanded, so an environment value is never
// YAML text: it cannot change the document's structure, a quote or a
// backslash in it is kept as is, and a comment is never expanded. The
// decoder's errors name the key and its line and never repeat a value.
type decoder struct {
	lookup  func(string) (string, bool)
	anchors map[string]ast.Node
	errs    []error
	// origins records, by key path ("sources[0].secrets[1]"), where each
	// string value that held a ${...} reference or literal text came from.
	origins map[string]origin
	// envValues are all environment values substituted anywhere, and
	// envUses each with the key path it was substituted at.
	envValues []string
	envUses   []envUse
	// steps counts values decoded, aliases included.
	steps int
	// strict, set by LoadPartial, makes an unset variable expand as if
	// it were set to "" in every key but those it names. Nil (Load):
	// an unset variable is an error in every key.
	strict map[string]bool
}

const (
	// maxDepth bounds nesting (and alias chains) far beyond any real
	// config.
	maxDepth = 64
	// maxSteps bounds the values decoded, so that aliases of aliases
	// cannot make a short file take forever.
	maxSteps = 100_000
	// maxErrors bounds the errors reported; decoding stops there.
	maxErrors = 100
)

// decodeYAML parses raw and decodes it into c, expanding ${...} in string
// values.
func decodeYAML(raw []byte, c *Config, lookup func(string) (string, bool)) (*decoder, error) {
	return decodeYAMLWith(raw, c, lookup, nil)
}

// decodeYAMLWith is decodeYAML; strict is decoder.strict.
func decodeYAMLWith(raw []byte, c *Config, lookup func(string) (string, bool), strict map[string]bool) (*decoder, error) {
	d := &decoder{lookup: lookup, anchors: map[string]ast.Node{}, origins: map[string]origin{}, strict: strict}
	file, err := parser.ParseBytes(raw, 0)
	if err != nil {
		return d, syntaxError(err)
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			return d, fmt.Errorf("line %d: a second YAML document; the config is one document", line(doc.Body))
		}
		body = doc.Body
	}
	if body == nil {
		return d, nil
	}
	// Anchors may sit under top-level keys starting with "x-", which the
	// decoder skips (the usual place for shared defaults, as in docker
	// compose files), or anywhere else; collect them all before decoding.
	ast.Walk(anchorCollector(d.anchors), body)
	d.decode(body, reflect.ValueOf(c).Elem(), "", 0)
	return d, errors.Join(d.errs...)
}

// anchorCollector records every anchor of a tree by name.
type anchorCollector map[string]ast.Node

// Visit implements ast.Visitor.
func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if x, ok := n.(*ast.AnchorNode); ok && x.Name != nil {
		a[x.Name.GetToken().Value] = x.Value
	}
	return a
}

// syntaxError reports where the YAML is malformed, without the source line
// that goccy/go-yaml would print (it may hold a secret written in the file).
func syntaxError(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		msg := ye.GetMessage()
		if strings.ContainsRune(msg, '\t') || strings.Contains(msg, "tab character") {
			// The parser's message shows the tab itself, which no one
			// can see on a terminal.
			msg = "a tab character: YAML indents with spaces; replace the tab with spaces"
		}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("line %d column %d: not valid YAML: %s", tk.Position.Line, tk.Position.Column, msg)
		}
		return fmt.Errorf("not valid YAML: %s", msg)
	}
	return errors.New("not valid YAML")
}

func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// step counts one value decoded and reports whether to go on: not once the
// file has proved too large or too wrong.
func (d *decoder) step(path string, n ast.Node) bool {
	d.steps++
	if d.steps == maxSteps+1 {
		d.fail(path, n, "more than %d values once aliases are expanded", maxSteps)
	}
	return d.steps <= maxSteps && len(d.errs) < maxErrors
}

// fail records an error about the value at path.
func (d *decoder) fail(path string, n ast.Node, format string, args ...any) {
	if len(d.errs) == maxErrors {
		d.errs = append(d.errs, errors.New("more errors left out"))
	}
	if len(d.errs) > maxErrors {
		return
	}
	where := path
	if l := line(n); l > 0 {
		if where == "" {
			where = fmt.Sprintf("line %d", l)
		} else {
			where = fmt.Sprintf("%s (line %d)", path, l)
		}
	}
	if where == "" {
		where = "config"
	}
	d.errs = append(d.errs, fmt.Errorf(where+": "+format, args...))
}

// resolve looks through tags, anchors and aliases to the node that holds the
// value.
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for range maxDepth {
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			if x.Name != nil {
				d.anchors[x.Name.GetToken().Value] = x.Value
			}
			if _, null := x.Value.(*ast.NullNode); x.Value == nil || null {
				// An unquoted value that starts with '&' (a generated
				// token) is an anchor with nothing after it: it would
				// load as no value at all, without a word. The name is
				// not repeated: it may be the rest of a secret.
				d.fail(path, x, "a value starting with '&' is a YAML anchor, and this one has no value after it; if it is text (a token, a password), quote it")
				return nil
			}
			n = x.Value
		case *ast.AliasNode:
			name := ""
			if x.Value != nil {
				name = x.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				// The name is not repeated: an unquoted value that
				// starts with '*' (a generated token) is read as an
				// alias, and its name is the rest of the secret.
				d.fail(path, x, "a value starting with '*' is a YAML alias, and no anchor of its name comes before it; if it is text (a token, a password), quote it")
				return nil
			}
			n = target
		default:
			return n
		}
	}
	d.fail(path, n, "too many aliases in a row")
	return nil
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// decode stores the value of n in v; path names it in errors.
func (d *decoder) decode(n ast.Node, v reflect.Value, path string, depth int) {
	if depth > maxDepth {
		d.fail(path, n, "nested too deeply")
		return
	}
	if !d.step(path, n) {
		return
	}
	n = d.resolve(n, path)
	if n == nil {
		return
	}
	if v.Type() == jsonTextsType {
		d.jsonTexts(n, v, path)
		return
	}
	if _, ok := n.(*ast.NullNode); ok {
		// Unset: a key written null wins over a value merged before it
		// (<<), as any written key does.
		v.Set(reflect.Zero(v.Type()))
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path, depth+1)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.fail(path, n, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path, depth)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok && v.Type() == stringListType {
			// A StringList written as one value is a list of one.
			if s, ok := d.scalar(n, path); ok {
				v.Set(reflect.ValueOf(StringList{s}))
			}
			return
		}
		if !ok {
			d.fail(path, n, "want a list (like [a, b] or lines starting with -), not %s", kind(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, item := range seq.Values {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			d.fail(path, n, "unsupported map type %s", v.Type())
			return
		}
		values, ok := d.mapping(n)
		if !ok {
			d.fail(path, n, "want keys and values (key: value), not %s", kind(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(values))
		for _, mv := range values {
			k := keyText(mv.Key)
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(mv.Value, e, path+"."+k, depth+1)
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if s, ok := d.scalar(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		if b, ok := n.(*ast.BoolNode); ok {
			v.SetBool(b.Value)
			return
		}
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		switch s {
		case "true", "True", "TRUE":
			v.SetBool(true)
		case "false", "False", "FALSE":
			v.SetBool(false)
		default:
			d.fail(path, n, "want true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := d.integer(n, path)
		if ok && v.OverflowInt(i) {
			d.fail(path, n, "want a whole number of at most %d", int64(1)<<(v.Type().Bits()-1)-1)
			return
		}
		if ok {
			v.SetInt(i)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := d.integer(n, path)
		if ok && (i < 0 || v.OverflowUint(uint64(i))) {
			d.fail(path, n, "want a whole number from 0 to %d", uint64(1)<<(v.Type().Bits())-1)
			return
		}
		if ok {
			v.SetUint(uint64(i))
		}
	case reflect.Float32, reflect.Float64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(path, n, "want a number")
			return
		}
		v.SetFloat(f)
	default:
		d.fail(path, n, "unsupported type %s", v.Type())
	}
}

// integer reads a whole number: as YAML wrote it, or in decimal after
// expansion.
func (d *decoder) integer(n ast.Node, path string) (int64, bool) {
	if in, ok := n.(*ast.IntegerNode); ok {
		if tk := in.GetToken(); tk != nil && legacyOctal(tk.Value) {
			// YAML 1.1 reads 010 as 8; the same text from the
			// environment reads as 10. Neither is sure to be meant.
			d.fail(path, n, "a whole number written with a leading 0 reads as octal in YAML (010 is 8): write it without the 0, or as 0o10 if octal is meant")
			return 0, false
		}
		switch i := in.Value.(type) {
		case int64:
			return i, true
		case uint64:
			if i <= math.MaxInt64 {
				return int64(i), true
			}
		}
		d.fail(path, n, "want a whole number of at most %d", int64(math.MaxInt64))
		return 0, false
	}
	s, ok := d.scalar(n, path)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		d.fail(path, n, "want a whole number")
		return 0, false
	}
	return i, true
}

// legacyOctal reports whether s, an integer's text, has a leading 0
// followed by digits (010, -07): YAML 1.1's octal.
func legacyOctal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0' && strings.Trim(s, "0123456789_") == ""
}

// jsonTexts decodes n, a value or a list of values, into v, a JSONTexts:
// a null or a boolean as JSON writes it, any other scalar as scalar reads
// it.
func (d *decoder) jsonTexts(n ast.Node, v reflect.Value, path string) {
	one := func(n ast.Node, path string) (string, bool) {
		switch x := n.(type) {
		case *ast.NullNode:
			return "null", true
		case *ast.BoolNode:
			return strconv.FormatBool(x.Value), true
		}
		return d.scalar(n, path)
	}
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		if s, ok := one(n, path); ok {
			v.Set(reflect.ValueOf(JSONTexts{s}))
		}
		return
	}
	out := make(JSONTexts, 0, len(seq.Values))
	for i, item := range seq.Values {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !d.step(p, item) {
			return
		}
		if item = d.resolve(item, p); item == nil {
			return
		}
		if s, ok := one(item, p); ok {
			out = append(out, s)
		}
	}
	v.Set(reflect.ValueOf(out))
}

// scalar returns the text of a scalar, with ${...} expanded in strings. It
// records an error for a list, a mapping or an unset variable.
func (d *decoder) scalar(n ast.Node, path string) (string, bool) {
	var text string
	switch x := n.(type) {
	case *ast.StringNode:
		text = x.Value
		if tk := x.GetToken(); tk != nil && tk.Type == token.StringType && slices.ContainsFunc(strings.Split(tk.Origin, "\n"),
			func(l string) bool { return strings.ContainsRune(strings.TrimSpace(l), '\t') }) {
			// The parser drops a tab inside an unquoted value ("a<TAB>b"
			// loads as "ab"): a pasted secret or a "cut -d<TAB>"
			// argument would load changed. Line by line: the white
			// space YAML strips where a value folds onto the next line
			// may hold a tab. The value is not repeated.
			d.fail(path, n, "a tab inside an unquoted value, which YAML's reader drops; quote the value (\"a\\tb\" in double quotes)")
			return "", false
		}
	case *ast.LiteralNode:
		if x.Value != nil {
			text = x.Value.Value
		}
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		d.origins[path] = origin{literal: true}
		return n.GetToken().Value, true
	default:
		d.fail(path, n, "want a single value, not %s", kind(n))
		return "", false
	}
	lookup := d.lookup
	if d.strict != nil && !d.strict[path] {
		lookup = func(name string) (string, bool) {
			v, _ := d.lookup(name)
			return v, true
		}
	}
	x, err := expandEnv(text, lookup)
	if err != nil {
		d.fail(path, n, "%v", err)
		return "", false
	}
	d.origins[path] = x.origin
	d.envValues = append(d.envValues, x.envValues...)
	for _, v := range x.envValues {
		d.envUses = append(d.envUses, envUse{path: path, value: v})
	}
	return x.value, true
}

// mapping returns the key-value pairs of a mapping node.
func (d *decoder) mapping(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch x := n.(type) {
	case *ast.MappingNode:
		return x.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{x}, true
	}
	return nil, false
}

func keyText(k ast.MapKeyNode) string {
	if s, ok := k.(*ast.StringNode); ok {
		return s.Value
	}
	if tk := k.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

// kind names what a node holds, for "want X, not Y" messages.
func kind(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "keys and values"
	case *ast.SequenceNode:
		return "a list"
	}
	return "a single value"
}

// structField is one settable field of a struct, by its YAML key.
type structField struct {
	key   string
	index int
}

func fieldsOf(t reflect.Type) []structField {
	var fs []structField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" {
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		fs = append(fs, structField{key, i})
	}
	return fs
}

// extensionPrefix starts the top-level keys the config ignores: x-defaults:
// &defaults {...} holds values that sources take with <<: *defaults. No
// key of the config starts with it (they use "_"), so no typo of one is
// taken for such a key.
const extensionPrefix = "x-"

// decodeStruct fills a struct from a mapping. Merge keys (<<: *anchor) are
// applied first, so keys written in the mapping win. Every unknown key is
// reported, with the known key it most resembles, but the top level's
// x-… keys (extensionPrefix), which are skipped.
func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string, depth int) {
	if !d.step(path, n) {
		return
	}
	values, ok := d.mapping(n)
	if !ok {
		d.fail(path, n, "want keys and values (key: value), not %s", kind(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, mv := range values {
		if !mv.Key.IsMergeKey() {
			continue
		}
		src := d.resolve(mv.Value, path)
		if seq, ok := src.(*ast.SequenceNode); ok {
			// The maps earlier in the list override the later ones (the
			// YAML merge type): apply them from the last to the first.
			for _, item := range slices.Backward(seq.Values) {
				d.decodeStruct(d.resolve(item, path), v, path, depth+1)
			}
		} else if src != nil {
			d.decodeStruct(src, v, path, depth+1)
		}
	}
	seen := map[string]int{}
	for _, mv := range values {
		if mv.Key.IsMergeKey() {
			continue
		}
		k := keyText(mv.Key)
		kpath := k
		if path != "" {
			kpath = path + "." + k
		}
		if first, dup := seen[k]; dup {
			d.fail(kpath, mv.Key, "set twice (first on line %d); keep one", first)
			continue
		}
		seen[k] = line(mv.Key)
		if path == "" && strings.HasPrefix(k, extensionPrefix) {
			continue // a place for anchors of shared values; read where aliased
		}
		f, ok := findField(fields, k)
		if !ok {
			if near := nearest(k, fields); near != "" {
				d.fail(kpath, mv.Key, "unknown key; did you mean %s?", near)
			} else if parent := keyOfChild(v.Type(), fields, k); parent != "" {
				d.fail(kpath, mv.Key, "unknown key here; %s is a key of %s, so move it under %s:", k, parent, parent)
			} else {
				d.fail(kpath, mv.Key, "unknown key")
			}
			continue
		}
		d.decode(mv.Value, v.Field(f.index), kpath, depth+1)
	}
}

// keyOfChild returns the field of t whose struct (or list of structs) has
// the key, for a key written one level too high.
func keyOfChild(t reflect.Type, fs []structField, key string) string {
	for _, f := range fs {
		ft := t.Field(f.index).Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || reflect.PointerTo(ft).Implements(textUnmarshaler) {
			continue
		}
		if _, ok := findField(fieldsOf(ft), key); ok {
			return f.key
		}
	}
	return ""
}

func findField(fs []structField, key string) (structField, bool) {
	for _, f := range fs {
		if f.key == key {
			return f, true
		}
	}
	return structField{}, false
}

// nearest returns the known key closest to key in edit distance, if it is
// close enough to be a likely typo.
func nearest(key string, fs []structField) string {
	best, bestDist := "", 0
	for _, f := range fs {
		dist := editDistance(strings.ToLower(key), f.key)
		if best == "" || dist < bestDist {
			best, bestDist = f.key, dist
		}
	}
	if best == "" || bestDist > max(2, len(best)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
