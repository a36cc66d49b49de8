package printable

import (
	"encoding/json"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestEscape: what prints is kept, what does not is escaped, and Is says
// which. cmd/hookbox's TestPrintable holds the fuller table.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"order.paid é 🎉":    "order.paid é 🎉",
		"evt_\u202egnp.exe": `evt_\u202egnp.exe`,
		"\x1b[2J\xff\u200b": `\x1b[2J\xff\u200b`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if Is(in) != (in == want) {
			t.Errorf("Is(%q) = %v", in, Is(in))
		}
	}
}

// TestJSON: in JSON text, what an encoder leaves raw but does not print
// is written as \u escapes, and the text decodes to the same value; what
// prints, and what JSON escapes itself, is kept.
func TestJSON(t *testing.T) {
	for v, changed := range map[string]bool{
		"order.paid é 🎉 \" \\ \n":             false,
		"x\u009b31m\u0085":                    true,
		"evt_\u202egnp.exe\u200b\u2028\u00a0": true,
		"tag\U000e0041":                       true,
	} {
		b, err := json.Marshal(map[string]string{"k": v})
		if err != nil {
			t.Fatal(err)
		}
		out := JSON(b)
		for _, r := range string(out) {
			if r >= utf8.RuneSelf && !unicode.IsPrint(r) {
				t.Errorf("JSON(%s) holds %U raw", b, r)
			}
		}
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil || got["k"] != v {
			t.Errorf("JSON(%s) = %s, decodes to %q, %v; want %q", b, out, got["k"], err, v)
		}
		if (string(out) != string(b)) != changed {
			t.Errorf("JSON(%s) = %s: changed %v, want %v", b, out, !changed, changed)
		}
	}
	if got := string(JSON([]byte(`"x\u009b` + "\u009b\U000e0041\"\xff"))); got != `"x\u009b\u009b\udb40\udc41"`+"\xff" {
		t.Errorf("JSON = %q", got)
	}
}
