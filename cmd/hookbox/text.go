package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable makes s safe to print on a terminal: event types, delivery
// ids, headers and errors come from senders and targets, and their escape
// sequences would otherwise drive the operator's terminal (clear it, set
// its title, hide or reorder text). Control characters, other runes that
// do not print (bidi overrides, zero-width and format characters) and
// bytes that are not UTF-8 are written as Go escapes: \n, \r, \t, \x1b,
// \u202e, \xff for an invalid byte. Printable text, spaces included, is
// kept as it is.
func printable(s string) string {
	if isPrintable(s) {
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

// isPrintable reports whether printable would return s unchanged.
func isPrintable(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// printableLines is printable for text of several lines: the line breaks
// and tabs are kept, everything else is escaped. Tabs move the cursor
// only forward, and multi-line errors indent with them (pgx lists each
// host it failed to reach on a line of its own after a tab), which read
// as literal \t sequences when escaped.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = printable(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}
