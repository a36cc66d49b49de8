package routing

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUnstorableKeyIsHashed: an order key that is not valid UTF-8 (a
// header's bytes) or holds a NUL (a JSON string's \u0000) is stored as its
// hash, as a long one is, since PostgreSQL's text refuses both and would
// refuse the verified delivery with it; equal keys stay equal.
func TestUnstorableKeyIsHashed(t *testing.T) {
	byHeader := New([]Rule{{Target: "a", OrderBy: "header:X-Key"}})
	byJSON := New([]Rule{{Target: "a", OrderBy: "json:id"}})
	for name, keys := range map[string][2]string{
		"latin-1 header": {
			byHeader.Routes("", "d1", http.Header{"X-Key": {"caf\xe9"}}, nil)[0].OrderKey,
			byHeader.Routes("", "d2", http.Header{"X-Key": {"caf\xe9"}}, nil)[0].OrderKey,
		},
		"NUL in JSON": {
			byJSON.Routes("", "d1", nil, []byte(`{"id":"a\u0000b"}`))[0].OrderKey,
			byJSON.Routes("", "d2", nil, []byte(`{"id":"a\u0000b"}`))[0].OrderKey,
		},
	} {
		k := keys[0]
		if !strings.HasPrefix(k, "sha256:") || !utf8.ValidString(k) || strings.ContainsRune(k, 0) || k != keys[1] {
			t.Errorf("%s: keys %q and %q, want the same sha256: key", name, k, keys[1])
		}
	}
	if k := byHeader.Routes("", "d1", http.Header{"X-Key": {"café"}}, nil)[0].OrderKey; k != "café" {
		t.Errorf("a UTF-8 key stored as %q, want it as it is", k)
	}
}
