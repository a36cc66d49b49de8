package main

import (
	"io"
	"strings"

	esc "github.com/hookbox/hookbox/internal/printable"
)

// printable is printable.Escape: text from senders, targets and the
// database, safe to print on a terminal.
func printable(s string) string { return esc.Escape(s) }

// printableLines is printable.Lines: printable for text of several
// lines, its line breaks and tabs kept.
func printableLines(s string) string { return esc.Lines(s) }

// writeBody writes b, a body as received (events show --payload,
// rejected show --body), byte for byte to a pipe or a file. On a
// terminal it writes b escaped (printableLines, its line breaks kept):
// the bytes are a sender's, and a refused delivery's are anyone's, whose
// escape sequences would drive the operator's terminal (set its
// clipboard or title, hide or rewrite lines).
func writeBody(w io.Writer, b []byte) error {
	if !isTerminal(w) {
		_, err := w.Write(b)
		return err
	}
	s := printableLines(string(b))
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, err := io.WriteString(w, s)
	return err
}
