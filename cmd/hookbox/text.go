package main

import esc "github.com/hookbox/hookbox/internal/printable"

// printable is printable.Escape: text from senders, targets and the
// database, safe to print on a terminal.
func printable(s string) string { return esc.Escape(s) }

// printableLines is printable.Lines: printable for text of several
// lines, its line breaks and tabs kept.
func printableLines(s string) string { return esc.Lines(s) }
