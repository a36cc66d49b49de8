package routing

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
)

// TestUnstorableKeyIsHashed: an order key that is not valid UTF-8 (a
// header's bytes) or holds a NUL (a JSON string's \u0000) is stored as its
// hash, as a long one is, since PostgreSQL's text refuses both and would
// refuse the verified delivery with it; so is one with a control
// character, which a log line would carry to a terminal. Equal keys stay
// equal.
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
		"ESC in JSON": {
			byJSON.Routes("", "d1", nil, []byte(`{"id":"a\u001b[2Jb"}`))[0].OrderKey,
			byJSON.Routes("", "d2", nil, []byte(`{"id":"a\u001b[2Jb"}`))[0].OrderKey,
		},
		"C1 in a header": {
			byHeader.Routes("", "d1", http.Header{"X-Key": {"a\u009b2J"}}, nil)[0].OrderKey,
			byHeader.Routes("", "d2", http.Header{"X-Key": {"a\u009b2J"}}, nil)[0].OrderKey,
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

// TestKeysDoNotCollide: a sender's value equal to the key of a delivery
// without the value ("(none):" and its id), or to a hashed key
// ("sha256:" and hex), is hashed itself, so it never shares that key;
// nor does the value under a long delivery id's key. Ordinary values
// keep their keys.
func TestKeysDoNotCollide(t *testing.T) {
	tab := New([]Rule{{Target: "billing", OrderBy: "data.customer"}})
	key := func(id, customer string) string {
		body := `{"data":{}}`
		if customer != "" {
			body = `{"data":{"customer":"` + customer + `"}}`
		}
		return tab.Routes("", id, nil, []byte(body))[0].OrderKey
	}
	none := key("msg_1", "")
	if forged := key("msg_2", NoKeyPrefix+"msg_1"); forged == none {
		t.Errorf("a value equal to the key of a delivery without one: both %q", forged)
	}
	hashed := key("msg_3", strings.Repeat("c", hookbox.MaxOrderKeyLength+1))
	if forged := key("msg_4", hashed); forged == hashed {
		t.Errorf("a value equal to a hashed key: both %q", forged)
	}
	longID := strings.Repeat("i", 400)
	longNone := key(longID, "")
	if forged := key("msg_5", NoKeyPrefix+longID); forged == longNone || !strings.HasPrefix(longNone, NoKeyPrefix) || len(longNone) > hookbox.MaxOrderKeyLength {
		t.Errorf("a long delivery id's key %q, a value equal to its fallback: %q", longNone, forged)
	}
	if a, b := key("msg_6", longID), key("msg_7", longID); a != b || !strings.HasPrefix(a, "sha256:") {
		t.Errorf("one long value gave keys %q and %q", a, b)
	}
	for _, v := range []string{"cus_1", "none", "(none)", "sha256", "SHA256:ab", " (none):x"} {
		if k := key("msg_8", v); k != v {
			t.Errorf("value %q stored as the key %q, want it as it is", v, k)
		}
	}
}

// TestNoKeyOfALongIDIsItsOwn: a delivery without the value whose id is too
// long for a key gets "(none):" and the id's hash; another delivery whose
// id is that hash's text gets a key of its own, not the same one.
func TestNoKeyOfALongIDIsItsOwn(t *testing.T) {
	tab := New([]Rule{{Target: "billing", OrderBy: "data.customer"}})
	longID := strings.Repeat("i", 400)
	forged := hashKey(longID)
	a := tab.Routes("", longID, nil, []byte(`{"data":{}}`))[0].OrderKey
	b := tab.Routes("", forged, nil, []byte(`{"data":{}}`))[0].OrderKey
	if a == b {
		t.Errorf("deliveries %.20s… and %s without the value share the key %q", longID, forged, a)
	}
}
