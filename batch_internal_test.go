package hookbox

import (
	"net/http"
	"reflect"
	"testing"
)

// TestDecodeHeaderFastReadsBytes: the fast path reads a string stored
// for bytes (\u0001 and base64) itself, compact or as PostgreSQL's jsonb
// prints it, rather than leaving every header with such a value to
// encoding/json; what it cannot read it leaves to DecodeHeader's slow
// path.
func TestDecodeHeaderFastReadsBytes(t *testing.T) {
	want := http.Header{"X-Note": {"caf\xe9", "ok"}, "\xff": {"\x01"}}
	for _, b := range []string{
		string(EncodeHeader(want)),
		`{"X-Note": ["\u0001Y2Fm6Q==", "ok"], "\u0001/w==": ["\u0001AQ=="]}`,
	} {
		got, ok := decodeHeaderFast([]byte(b))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeHeaderFast(%s) = %q, %v; want %q", b, got, ok, want)
		}
	}
	for _, b := range []string{`{"A":["\u0001Y2Fm\n6Q=="]}`, `{"A":["\u0001Y2Fm6Q==\u0001"]}`, `{"A":["\u0001Y2Fm6Q==`} {
		if got, ok := decodeHeaderFast([]byte(b)); ok {
			t.Errorf("decodeHeaderFast(%s) = %q, true; want it left to encoding/json", b, got)
		}
	}
}
