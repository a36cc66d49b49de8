// Package printable escapes text that came from outside (senders,
// targets, the database) before an operator sees it, on a terminal or in
// the console: control characters, runes that do not print (bidi
// overrides, zero-width and format characters) and bytes that are not
// UTF-8 are written as Go escapes, so that text can neither drive a
// terminal nor pass, reordered or hidden, for other text.
package printable

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
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

// JSON returns b, JSON text, with the runes that JSON encoders write raw
// but that do not print written as \u escapes (a surrogate pair past
// U+FFFF): C1 controls (U+0080 to U+009F, U+009B among them, which some
// terminals take for the start of an escape sequence), bidi overrides,
// zero-width and other format characters, line and paragraph separators.
// The JSON decodes to the same values: unlike Escape, nothing is lost,
// and a program reading it sees the text as sent. Outside strings JSON
// holds only ASCII, so every rune escaped is inside one. b is returned
// as it is when nothing needs escaping; bytes that are not UTF-8 are
// left as they are (encoding/json and log/slog replace them already).
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if jsonEscaped(r, size) {
			break
		}
		i += size
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case !jsonEscaped(r, size):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// jsonEscaped reports whether JSON escapes the rune r, of size bytes.
func jsonEscaped(r rune, size int) bool {
	return !(r == utf8.RuneError && size == 1) && !unicode.IsPrint(r)
}

// JSONWriter returns a writer that writes what it is given to w through
// JSON. Each Write must hold whole runes, as the JSON handler of
// log/slog (a line each) and a json.Encoder (a value each) write them.
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
