package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/printable"
)

// maxShownBody is how much of a payload a page shows.
const maxShownBody = 256 << 10

// maxHexDump is how much of a binary payload a page dumps.
const maxHexDump = 4 << 10

// headerLine is one header value as shown.
type headerLine struct{ Name, Value string }

// headerLines lists h sorted by name, each name and value escaped as
// printable.Escape escapes it (\xe9 for a Latin-1 byte, \u202e for a
// bidi override).
func headerLines(h http.Header) []headerLine {
	var out []headerLine
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, headerLine{Name: printable.Escape(http.CanonicalHeaderKey(k)), Value: printable.Escape(v)})
		}
	}
	slices.SortStableFunc(out, func(a, b headerLine) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// shownBody is a payload as a page shows it: JSON pretty-printed, other
// text as is, anything else as a hex dump; html/template escapes it.
type shownBody struct {
	Shown    bool
	Kind     string // "JSON", "text" or "binary"
	Text     string
	Size     int
	Cut      bool // only the first part is shown
	Complete bool // the whole body was kept (false for a rejection's first bytes)
}

func showBody(b []byte, complete bool) shownBody {
	s := shownBody{Shown: true, Size: len(b), Complete: complete}
	if len(b) > maxShownBody {
		b, s.Cut = b[:maxShownBody], true
	}
	var pretty bytes.Buffer
	switch {
	case !s.Cut && json.Valid(b) && indentedSize(b) <= maxIndented(len(b)) && json.Indent(&pretty, b, "", "  ") == nil:
		s.Kind, s.Text = "JSON", pretty.String()
	case utf8.Valid(b):
		s.Kind, s.Text = "text", string(b)
	default:
		if len(b) > maxHexDump {
			b, s.Cut = b[:maxHexDump], true
		}
		s.Kind, s.Text = "binary", hex.Dump(b)
	}
	return s
}

// maxIndented bounds the pretty-printed form of an n-byte JSON body; a
// body that would grow past it is shown as text, as received. Indenting
// puts each element on a line of its own, indented by its depth, so a
// sender's 64 KiB of deeply nested arrays ([[[…0,0,0…]]]) grew 10,000
// times: a console page of 655 MB, and gigabytes of memory to make it.
func maxIndented(n int) int { return 4*n + 64<<10 }

// indentedSize is at least the size json.Indent makes of the valid JSON b
// with a two-space indent, in one pass and without making it: each
// bracket, brace and comma outside strings may start a line indented by
// its depth, and each colon gains a space.
func indentedSize(b []byte) int {
	n, depth := len(b), 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			n += 1 + 2*depth
		case c == ']' || c == '}':
			depth--
			n += 1 + 2*depth
		case c == ',':
			n += 1 + 2*depth
		case c == ':':
			n++
		}
	}
	return n
}

// chart is the last hour as small SVG bars: stored events, with the
// rejected deliveries of each minute stacked on top.
type chart struct {
	Bars  []bar
	Title string
	Empty bool
}

type bar struct {
	X, Y, H  int
	Rejected bool
}

const (
	chartHeight = 32
	barWidth    = 3
)

func newChart(stored, rejected [hookbox.OverviewMinutes]int) chart {
	top := 0
	for i := range stored {
		top = max(top, stored[i]+rejected[i])
	}
	c := chart{Title: fmt.Sprintf("last hour: %d stored, %d rejected", sum(stored[:]), sum(rejected[:])), Empty: top == 0}
	if top == 0 {
		return c
	}
	scale := func(n int) int {
		if n == 0 {
			return 0
		}
		return max(1, n*chartHeight/top)
	}
	for i := range stored {
		x := i * barWidth
		hs, hr := scale(stored[i]), scale(rejected[i])
		if hs > 0 {
			c.Bars = append(c.Bars, bar{X: x, Y: chartHeight - hs, H: hs})
		}
		if hr > 0 {
			c.Bars = append(c.Bars, bar{X: x, Y: chartHeight - hs - hr, H: hr, Rejected: true})
		}
	}
	return c
}

// funcs are the templates' helpers. shown escapes what does not print
// (printable.Escape) in text from senders, targets and the database: a
// delivery id written with a bidi override could otherwise pass for
// another, reordered; html/template escapes only markup.
var funcs = template.FuncMap{
	"shown":      printable.Escape,
	"shownLines": printable.Lines,
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	// waited shows how long an event due since t has waited: age, which
	// the store read on the clock it keeps due times on (the database
	// server's, on PostgreSQL), not this host's now minus t.
	"waited": func(t time.Time, age time.Duration) string {
		if t.IsZero() {
			return "–"
		}
		return age.Round(time.Second).String()
	},
	"took": func(a hookbox.Attempt) string {
		d, ok := a.Took()
		if !ok {
			return ""
		}
		return d.Round(time.Millisecond).String()
	},
	"chartWidth":  func() int { return hookbox.OverviewMinutes * barWidth },
	"chartHeight": func() int { return chartHeight },
	"barWidth":    func() int { return barWidth - 1 },
	"id":          func(id int64) string { return strconv.FormatInt(id, 10) },
	// replayFilter is the dead events filter a bulk replay form carries.
	"replayFilter": replayFilter,
}
