package hookbox_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
)

// TestEncodeHeaderMatchesEncodingJSON: EncodeHeader decodes to what
// encoding/json makes of the same header, for awkward names and values
// that are UTF-8 text (all a header stored before bytes were kept held).
func TestEncodeHeaderMatchesEncodingJSON(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Webhook-Id": {"msg_1"}, "Content-Type": {"application/json"}},
		{"X-Quote": {`a"b\c`, "</script>&"}, "X-Ctl": {"\x00\x02\x01\t\n\x7f"}},
		{"X-Utf8": {"żółw €", "\uFFFD", "\u2028"}},
		{"X-Empty": {}, "X-Nil": nil, "X-Blank": {""}},
	} {
		checkEncodeHeader(t, h)
	}
}

// TestEncodeHeaderKeepsBytes: a name or value that is not UTF-8 text (an
// obs-text byte net/http accepts, as Latin-1 é, alone or inside UTF-8
// text), or that starts with \x01, comes back from DecodeHeader byte for
// byte; it used to come back with U+FFFD in place of each such byte. It is
// stored as \u0001 and base64, so the JSON stays text PostgreSQL's jsonb
// takes, and jsonb's way of printing it back (spaces) decodes the same.
func TestEncodeHeaderKeepsBytes(t *testing.T) {
	h := http.Header{
		"X-Note":    {"caf\xe9", "żółw \xe9 €", "\xff\xfe ok \xe2\x82", "ok"},
		"X-Ctl":     {"\x01", "\x01text", "\x01\xe9", ""},
		"X-\xe9":    {"v"},
		"\x01Name":  {"\x01"},
		"X-Nil":     nil,
		"X-Escaped": {"\u0001", `\u0001Y2Fm6Q==`},
	}
	b := hookbox.EncodeHeader(h)
	if !json.Valid(b) || !utf8.Valid(b) || bytes.Contains(b, []byte(`\u0000`)) || bytes.Contains(b, []byte(`\ufffd`)) {
		t.Fatalf("EncodeHeader = %s: want JSON text without \\u0000 or \\ufffd", b)
	}
	if want := `"X-Note":["\u0001Y2Fm6Q==",`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("EncodeHeader = %s, want it to hold %s", b, want)
	}
	got, err := hookbox.DecodeHeader(b)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Errorf("DecodeHeader(%s) = %q, %v; want %q", b, got, err, h)
	}
	// As PostgreSQL's jsonb prints it back: spaces after : and ,.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	spaced, _ := json.MarshalIndent(v, "", " ")
	if got, err := hookbox.DecodeHeader(spaced); err != nil || !reflect.DeepEqual(got, h) {
		t.Errorf("DecodeHeader(%s) = %q, %v; want %q", spaced, got, err, h)
	}
	checkEncodeHeader(t, h)
}

func FuzzEncodeHeader(f *testing.F) {
	f.Add("Webhook-Id", "msg_1", "\xff")
	f.Add("X-A", `"\`, "\u2028")
	f.Add("X-Note", "caf\xe9", "\x01")
	f.Add("\x01\xe9", "\x01AQ==", "")
	f.Fuzz(func(t *testing.T, name, v1, v2 string) {
		checkEncodeHeader(t, http.Header{name: {v1, v2}, "Z": {v2}})
	})
}

// isText reports whether every name and value of h is UTF-8 text that
// does not start with \x01: what EncodeHeader writes as encoding/json does.
func isText(h http.Header) bool {
	for k, vs := range h {
		for _, s := range append([]string{k}, vs...) {
			if !utf8.ValidString(s) || strings.HasPrefix(s, "\x01") {
				return false
			}
		}
	}
	return true
}

// checkEncodeHeader: EncodeHeader writes JSON text that DecodeHeader reads
// back as h, byte for byte; for a header of text, JSON that means what
// encoding/json writes.
func checkEncodeHeader(t *testing.T, h http.Header) {
	t.Helper()
	got := hookbox.EncodeHeader(h)
	if !json.Valid(got) || !utf8.Valid(got) {
		t.Fatalf("EncodeHeader(%q) = %s: not JSON text", h, got)
	}
	back, err := hookbox.DecodeHeader(got)
	if err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("DecodeHeader(EncodeHeader(%q) = %s) = %q, %v", h, got, back, err)
	}
	checkDecodeHeader(t, got)
	if !isText(h) {
		return
	}
	want, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("EncodeHeader(%q) = %s: not JSON: %v", h, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("EncodeHeader(%q) = %s, encoding/json says %s", h, got, want)
	}
	checkDecodeHeader(t, want)
}

// rawString is what a decoded JSON string s of a stored header stands
// for: when s is \x01 and the canonical base64 of bytes EncodeHeader
// would not write as text, those bytes; else s. Written apart from
// hookbox's, by re-encoding, to check it.
func rawString(s string) (string, bool) {
	enc, ok := strings.CutPrefix(s, "\x01")
	if !ok {
		return s, false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || base64.StdEncoding.EncodeToString(raw) != enc || isText(http.Header{"A": {string(raw)}}) {
		return s, false
	}
	return string(raw), true
}

// checkDecodeHeader: DecodeHeader reads b as encoding/json does, and then
// each string EncodeHeader wrote for bytes as those bytes (a decoded name
// taking the place of one stored as itself that equals it, which
// EncodeHeader never writes: such a name it stores as bytes too).
func checkDecodeHeader(t *testing.T, b []byte) {
	t.Helper()
	var want http.Header
	wantErr := json.Unmarshal(b, &want)
	if want != nil {
		w := http.Header{}
		var decoded http.Header = http.Header{}
		for k, vs := range want {
			if vs != nil {
				vs = append([]string{}, vs...)
				for i := range vs {
					vs[i], _ = rawString(vs[i])
				}
			}
			if name, ok := rawString(k); ok {
				decoded[name] = vs
			} else {
				w[k] = vs
			}
		}
		for k, vs := range decoded {
			w[k] = vs
		}
		want = w
	}
	got, err := hookbox.DecodeHeader(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("DecodeHeader(%s) error = %v, encoding/json says %v", b, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeHeader(%s) = %#v, want %#v", b, got, want)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"A":["b","c"],"D":[]}`, `{"A":["b"],"A":["c"]}`, `{"A":["\u00e9"]}`, `{"A":null}`, `{"A":["b"]`, ` {}`, `{"A": ["b", "c"], "D": []}`, ` { "A" : [ "b" ] } `,
		// Strings EncodeHeader writes for bytes, and others that start alike.
		`{"A":["\u0001Y2Fm6Q=="]}`, `{"A": ["\u0001Y2Fm6Q==", "caf\ufffd"]}`, `{"\u0001/w==":["\u0001"]}`, `{"A":["\u0001AQ=="],"\u0001AQ==":[],"\u0001":["x"]}`,
		`{"A":["\u0001Y2Fm\n6Q=="]}`, `{"A":["\u0001Y2Fm6R=="]}`, `{"A":["\u0001Y2Fm6Q"]}`, `{"A":["\u0001b2s="]}`, `{"A":["\u0001Y2Fm6Q==`, `{"A":["\u0001`, `{"\u0001":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeHeader(t, b) })
}
