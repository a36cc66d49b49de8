// Package printable escapes text that came from outside (senders,
// targets, the database) before an operator sees it, on a terminal or in
// the console: control characters, runes that do not print (bidi
// overrides, zero-width and format characters) and bytes that are not
// UTF-8 are written as Go escapes, so that text can neither drive a
// terminal nor pass, reordered or hidden, for other text.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes s safe to print on a terminal or show in a page: event types, delivery
// ids, headers and errors come from senders and targets, and their escape
// sequences would otherwise drive the operator's terminal (clear it, set
// its title, hide or reorder text). Control characters, other runes that
// do not print (bidi overrides, zero-width and format characters) and
// bytes that are not UTF-8 are written as Go escapes: \n, \r, \t, \x1b,
// \u202e, \xff for an invalid byte. Printable text, spaces included, is
// kept as it is.
func Escape(s string) string {
	if Is(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// Is reports whether Escape would return s unchanged.
func Is(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// Lines is Escape for text of several lines: the line breaks
// and tabs are kept, everything else is escaped. Tabs move the cursor
// only forward, and multi-line errors indent with them (pgx lists each
// host it failed to reach on a line of its own after a tab), which read
// as literal \t sequences when escaped.
func Lines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = Escape(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}
