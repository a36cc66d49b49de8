package main

import "testing"

func TestPrintable(t *testing.T) {
	cases := map[string]string{
		"order.paid":       "order.paid",
		"é ü 日本 emoji 🎉":   "é ü 日本 emoji 🎉",
		"\x1b[2Jclear":     `\x1b[2Jclear`,
		"bell\a":           `bell\x07`,
		"a\tb\r\nc":        `a\tb\r\nc`,
		"del\x7f":          `del\x7f`,
		"csi\u009b":        `csi\u009b`,
		"rtl\u202eexe.txt": `rtl\u202eexe.txt`,
		"zero\u200bwidth":  `zero\u200bwidth`,
		"bad\xff\xfeutf8":  `bad\xff\xfeutf8`,
		"tag\U000e0041":    `tag\U000e0041`,
		`back\slash stays`: `back\slash stays`,
	}
	for in, want := range cases {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := printableLines("one\x1b[0m\ntwo"); got != "one\\x1b[0m\ntwo" {
		t.Errorf("printableLines = %q", got)
	}
}

// TestPrintableLinesKeepsTabs: the multi-line errors of pgx indent each
// failed host with a tab; printableLines keeps it, and still escapes the
// other control characters. It used to print a literal \t.
func TestPrintableLinesKeepsTabs(t *testing.T) {
	in := "failed to connect to `user=postgres database=test`:\n\t127.0.0.1:1 (127.0.0.1): dial error\n\t\x1b]0;title\a\r"
	want := "failed to connect to `user=postgres database=test`:\n\t127.0.0.1:1 (127.0.0.1): dial error\n\t\\x1b]0;title\\x07\\r"
	if got := printableLines(in); got != want {
		t.Errorf("printableLines(%q)\n= %q\nwant %q", in, got, want)
	}
}
