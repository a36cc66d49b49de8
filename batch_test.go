package hookbox_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/hookbox/hookbox"
)

// TestEncodeHeaderMatchesEncodingJSON: EncodeHeader decodes to what
// encoding/json makes of the same header, for awkward names and values.
func TestEncodeHeaderMatchesEncodingJSON(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Webhook-Id": {"msg_1"}, "Content-Type": {"application/json"}},
		{"X-Quote": {`a"b\c`, "</script>&"}, "X-Ctl": {"\x00\x01\t\n\x7f"}},
		{"X-Bad-Utf8": {"\xff\xfe ok \xe2\x82"}, "X-Utf8": {"żółw €"}},
		{"X-Empty": {}, "X-Nil": nil, "X-Blank": {""}},
	} {
		checkEncodeHeader(t, h)
	}
}

func FuzzEncodeHeader(f *testing.F) {
	f.Add("Webhook-Id", "msg_1", "\xff")
	f.Add("X-A", `"\`, "\u2028")
	f.Fuzz(func(t *testing.T, name, v1, v2 string) {
		checkEncodeHeader(t, http.Header{name: {v1, v2}, "Z": {v2}})
	})
}

func checkEncodeHeader(t *testing.T, h http.Header) {
	t.Helper()
	got := hookbox.EncodeHeader(h)
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
	checkDecodeHeader(t, got)
	checkDecodeHeader(t, want)
}

// checkDecodeHeader: DecodeHeader reads b as encoding/json does.
func checkDecodeHeader(t *testing.T, b []byte) {
	t.Helper()
	var want http.Header
	wantErr := json.Unmarshal(b, &want)
	got, err := hookbox.DecodeHeader(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("DecodeHeader(%s) error = %v, encoding/json says %v", b, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeHeader(%s) = %#v, encoding/json says %#v", b, got, want)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"A":["b","c"],"D":[]}`, `{"A":["b"],"A":["c"]}`, `{"A":["\u00e9"]}`, `{"A":null}`, `{"A":["b"]`, ` {}`, `{"A": ["b", "c"], "D": []}`, ` { "A" : [ "b" ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeHeader(t, b) })
}
