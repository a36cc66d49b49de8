package routing

import (
	"bytes"
	"encoding/json"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decodedLookup is how routing read a body before scan.go: decode it
// whole (UseNumber) and follow the path through the Go values. The fuzz
// test holds the scanner to it.
func decodedLookup(body []byte, p string) (v any, ok bool) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	cur := doc
	for _, part := range strings.Split(p, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// decodedText is the text the decoded lookup compared: a string as it is,
// a number, boolean or null as its JSON text, an object or array as
// compact JSON.
func decodedText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzFindMatchesDecode: on valid JSON, the scanner finds a value at a
// path exactly when decoding the whole body does, and reads the same text
// there (for an object or array, the same compact JSON, given a limit of
// its length, and none given one byte less); the order key is that text
// for a string, number or boolean, and none for null, an object or an
// array.
func FuzzFindMatchesDecode(f *testing.F) {
	for _, c := range []struct{ body, path string }{
		{`{"data":{"customer":"c1","items":[{"sku":"a"}]}}`, "data.items.0.sku"},
		{`{"data":{"customer":"c1"},"data":{"x":1}}`, "data.customer"},
		{`{"a":{"b":[1,{"c":"<&>\u2028"}]},"a":{"b":[2,{"c":"\ud83d\ude00"}]}}`, "a"},
		{`{"d\u0061ta":{"c\\u":"\ud800x"}}`, "data.c\\u"},
		{"{\"\xff\":\"\xfe\",\"\xef\xbf\xbd\":1}", "\uFFFD"},
		{` [ 0 , [ 1 , 2 ] , {"01" : -1.5e3} ] `, "1.01"},
		{`[0,[1,2]]`, "1.+1"},
		{`[0,[1,2]]`, "-0"},
		{`{"":{"":null}}`, "."},
		{`{"a":{"z":1,"b":[true,false],"b":{},"m":"\"\\/\b\f\n\r\t\u0001\u007f"}}`, "a"},
		{`"top"`, "a"},
		{`{"a":[[[[[]]]],{"b":{"c":{}}}]}`, "a"},
	} {
		f.Add([]byte(c.body), c.path)
	}
	f.Fuzz(func(t *testing.T, body []byte, p string) {
		if !json.Valid(body) {
			return
		}
		want, found := decodedLookup(body, p)
		var scratch []byte
		i, ok := find(body, parsePath(p), &scratch)
		if ok != found {
			t.Fatalf("find %q in %q: %v, decoding found %v", p, body, ok, found)
		}
		if !ok {
			return
		}
		wantText := decodedText(want)
		for _, limit := range []int{len(wantText), len(wantText) + 7, max(len(wantText), 6*len(body))} {
			if got, fits := text(body, i, limit); !fits || got != wantText {
				t.Fatalf("text at %q of %q in %d bytes: %q (fits %v), decoding gives %q", p, body, limit, got, fits, wantText)
			}
		}
		switch want.(type) {
		case map[string]any, []any:
			if _, fits := text(body, i, len(wantText)-1); fits {
				t.Fatalf("text at %q of %q fits in %d bytes, decoding gives %q", p, body, len(wantText)-1, wantText)
			}
		}
		wantKey := ""
		switch want.(type) {
		case string, json.Number, bool:
			wantKey = wantText
		}
		if k := keyText(body, i); k != wantKey {
			t.Fatalf("key at %q of %q: %q, want %q", p, body, k, wantKey)
		}
	})
}

// TestTrailingTextIsNotJSON: a body with text after its JSON value is not
// JSON: it matches no JSON rule and gives no order key. White space
// around the value is JSON still.
func TestTrailingTextIsNotJSON(t *testing.T) {
	tab := New([]Rule{
		{Target: "paid", Match: map[string][]string{"status": {"paid"}}},
		{Target: "ordered", OrderBy: "customer"},
	})
	for body, want := range map[string][]Route{
		`{"status":"paid","customer":"c1"} this is not JSON`:  {{"ordered", NoKeyPrefix + "d1"}},
		`{"status":"paid","customer":"c1"}{"status":"paid"}`:  {{"ordered", NoKeyPrefix + "d1"}},
		"\r\n {\"status\":\"paid\",\"customer\":\"c1\"} \n\t": {{"paid", ""}, {"ordered", "c1"}},
	} {
		if got := routes(tab, "", nil, body); !slices.Equal(got, want) {
			t.Errorf("body %q: routes %v, want %v", body, got, want)
		}
	}
}

// TestRoutesMemoryBounded: routing a body of up to a megabyte allocates
// at most 64 KiB (a few hundred bytes in fact), whatever it holds, where
// decoding it whole took some fifty times its size: only the values at
// the rules' paths are decoded, an object or array at a match path only
// as far as the longest value accepted there, and the check that the body
// is JSON keeps a bit per level of nesting.
func TestRoutesMemoryBounded(t *testing.T) {
	tab := New([]Rule{
		{Target: "billing", OrderBy: "data.customer"},
		{Target: "paid", Match: map[string][]string{"data.status": {"paid", `{"a":1}`}}},
	})
	many := strings.Repeat("{},", (1<<20)/3) + "0"
	for name, body := range map[string]string{
		"array of objects":        "[" + many + "]",
		"array of numbers":        "[" + strings.Repeat("0,", 1<<19) + "0]",
		"values before the path":  `{"x":[` + many + `],"data":{"customer":"c1","status":"paid"}}`,
		"object at a match path":  `{"data":{"status":{"a":[` + many + `],"a":1}}}`,
		"array at a match path":   `{"data":{"status":[` + many + `]}}`,
		"many members":            `{"data":{"status":{` + strings.Repeat(`"a":1,`, 1<<17) + `"a":1}}}`,
		"escaped names":           `{"data":{` + strings.Repeat(`"\u0061":1,`, 1<<16) + `"customer":"c"}}`,
		"long string at a match":  `{"data":{"status":"` + strings.Repeat(`\u0041`, 1<<17) + `"}}`,
		"deep arrays at a match":  `{"data":{"status":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}`,
		"deep objects at a match": `{"data":{"status":` + strings.Repeat(`{"a":`, 9000) + "0" + strings.Repeat("}", 9000) + `}}`,
	} {
		b := []byte(body)
		if !json.Valid(b) {
			t.Fatalf("%s: the body is not JSON", name)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		tab.Routes("", "d", nil, b)
		runtime.ReadMemStats(&m1)
		got := m1.TotalAlloc - m0.TotalAlloc
		if got > 64<<10 {
			t.Errorf("%s: routing a %d-byte body allocated %d bytes", name, len(body), got)
		}
		t.Logf("%s: %d bytes allocated for a %d-byte body", name, got, len(body))
	}
}

// TestValidDepth: valid refuses JSON nested deeper than encoding/json
// reads, as json.Valid does (the fuzzer works slowly on such long inputs).
func TestValidDepth(t *testing.T) {
	for _, d := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, s := range []string{
			strings.Repeat("[", d) + strings.Repeat("]", d),
			strings.Repeat(`{"a":`, d) + "0" + strings.Repeat("}", d),
			strings.Repeat(`[{"a":`, d/2) + "0" + strings.Repeat("}]", d/2) + strings.Repeat(" ", d%2),
		} {
			if got, want := valid([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("depth %d, %.12s…: valid %v, json.Valid %v", d, s, got, want)
			}
		}
	}
	if !valid([]byte(strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth))) {
		t.Error("valid refuses the deepest JSON encoding/json reads")
	}
}

// FuzzValid: valid accepts exactly what json.Valid accepts, nesting depth
// included.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		``, ` `, `0`, `-0`, `01`, `-`, `1.`, `1.5e`, `1.5E+3`, `-0.0e-0`, `1e5x`,
		`"a\u00e9\"\\\/\b\f\n\r\t"`, `"\u00g0"`, `"\x"`, "\"\x01\"", "\"\xff\"", `"abc`,
		`true`, `tru`, `nulll`, `false `, ` {"a" : [1, 2, {"b":null}] } `, `{"a":1,}`, `[1,]`,
		`{"a"}`, `{1:2}`, `[1 2]`, `{"a":1}}`, `[]]`, `{"a":1]`, `[}`, `{}{}`, `{} x`,
		strings.Repeat(`[{"a":`, 70) + "0" + strings.Repeat("}]", 70),
		strings.Repeat(`[{"a":`, 70) + "0" + strings.Repeat("]}", 70),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := valid(body), json.Valid(body); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid says %v", body, got, want)
		}
	})
}

// TestMatchCopiesNoLongNumber: a number (or a literal, alone or in an
// object) at a match path longer than any accepted value is not copied to
// be compared: a signed megabyte-long number cost a megabyte per rule that
// read its path.
func TestMatchCopiesNoLongNumber(t *testing.T) {
	var rules []Rule
	for _, name := range []string{"a", "b", "c", "d"} {
		rules = append(rules, Rule{Target: name, Match: map[string][]string{"data.status": {"paid", `{"a":1}`}}})
	}
	tab := New(rules)
	for name, body := range map[string]string{
		"a number at the path":          `{"data":{"status":1` + strings.Repeat("0", 1<<20) + `}}`,
		"a number in an object at path": `{"data":{"status":{"a":1` + strings.Repeat("0", 1<<20) + `}}}`,
	} {
		b := []byte(body)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if rs := tab.Routes("", "d", nil, b); len(rs) != 0 {
			t.Errorf("%s: routed to %v", name, rs)
		}
		runtime.ReadMemStats(&m1)
		if got := m1.TotalAlloc - m0.TotalAlloc; got > 64<<10 {
			t.Errorf("%s: routing a %d-byte body allocated %d bytes", name, len(b), got)
		}
	}
}
