package target

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookbox/hookbox/redact"
)

// FuzzExecOutputTail writes a command's output (out, in writes of the
// sizes in splits) to the tail an exec target keeps for its log line and
// error, with secret configured, and checks what Last promises: at most n
// bytes besides the "…" that says output was cut, valid UTF-8 with no
// control character but newline and tab, never the secret, and, for
// output of no more than n bytes and no secret, the whole output as made
// safe. A command's output may echo what the event carried, the sender's
// bytes.
func FuzzExecOutputTail(f *testing.F) {
	f.Add("hello\nworld\n", "", uint8(64), uint8(16), []byte{3})
	f.Add("token=s3cr3t-value-1 and more", "s3cr3t-value-1", uint8(40), uint8(10), []byte{5, 1})
	f.Add("xxxxxxxxs3cr3t-value-1", "s3cr3t-value-1", uint8(30), uint8(8), []byte{})
	f.Add("s3cr3t\x00-value-1 \xff\xfe", "s3cr3t-value-1", uint8(60), uint8(60), []byte{2})
	f.Add("é€😀é€😀é€😀", "", uint8(7), uint8(5), []byte{1})
	f.Fuzz(func(t *testing.T, out, secret string, limit, n uint8, splits []byte) {
		red := redact.New(secret)
		b := &tailBuffer{limit: int(limit), red: red}
		rest := out
		for i := 0; len(rest) > 0; i++ {
			k := len(rest)
			if len(splits) > 0 {
				k = min(k, int(splits[i%len(splits)])+1)
			}
			b.Write([]byte(rest[:k]))
			rest = rest[k:]
		}
		got := b.Last(int(n))
		want := min(int(n), int(limit))
		body := strings.TrimPrefix(got, "…")
		if len(body) > want {
			t.Fatalf("Last(%d) with limit %d: %d bytes: %q", n, limit, len(body), got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("not UTF-8: %q", got)
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f }); i >= 0 {
			t.Fatalf("control character at %d: %q", i, got)
		}
		if red != nil && strings.Contains(got, secret) {
			t.Fatalf("secret %q shown: %q", secret, got)
		}
		if red == nil && len(out) <= want {
			// Control bytes (ASCII) are dropped as written, before the
			// rest is made valid UTF-8.
			kept := make([]byte, 0, len(out))
			for _, c := range []byte(out) {
				if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
					continue
				}
				kept = append(kept, c)
			}
			safe := strings.TrimSpace(strings.ToValidUTF8(string(kept), "\uFFFD"))
			if len(safe) <= want && got != safe {
				t.Fatalf("output %q of %d bytes kept as %q, want %q", out, len(out), got, safe)
			}
		}
	})
}
