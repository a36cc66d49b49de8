package printable

import "testing"

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
