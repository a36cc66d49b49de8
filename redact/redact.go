// Package redact masks secrets in text before it is stored or logged.
//
// A Redactor is built once from the secrets a process knows (webhook signing
// secrets, the admin token, extra forward header values) and then replaces
// every occurrence of each of them, and of their common encodings, by Mask.
// NewHandler wraps a slog.Handler so that every record passing through it is
// redacted.
//
// Guarantees:
//
//   - Every occurrence of a secret of at least MinLen bytes is masked, and so
//     are its forms that commonly end up in text: for a "whsec_" secret its
//     base64 key alone; for any secret its standard and URL-safe base64
//     encodings, its URL-query escaping and its JSON string escaping, when
//     they differ from it.
//   - Secrets shorter than MinLen bytes are not masked: masking "test" or
//     "1234" would mangle ordinary output (every "testing" in a log line)
//     while protecting little, since a secret that short can be guessed.
//     Configuration should refuse or warn about such secrets instead.
//   - A nil *Redactor is valid and masks nothing.
//   - Redaction works on whole strings: a secret split across two strings
//     (two log attributes, two reads of a pipe) is not recognised. Callers
//     that cut text keep enough of it around the cut (see Longest and Tail).
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// Mask replaces each secret.
const Mask = "[REDACTED]"

// MinLen is the length, in bytes, below which a secret is not masked.
const MinLen = 8

// whsecPrefix starts a Standard Webhooks secret; the rest is the base64 key.
const whsecPrefix = "whsec_"

// Redactor masks a fixed set of secrets. It is safe for concurrent use.
type Redactor struct {
	needles []string // longest first, each at least MinLen bytes, no duplicates
}

// New returns a Redactor for secrets and their common encodings. Secrets
// shorter than MinLen bytes are ignored. It returns nil when nothing is left
// to mask.
func New(secrets ...string) *Redactor {
	seen := map[string]bool{}
	var needles []string
	add := func(s string) {
		if len(s) >= MinLen && !seen[s] {
			seen[s] = true
			needles = append(needles, s)
		}
	}
	for _, s := range secrets {
		if len(s) < MinLen {
			continue
		}
		for _, form := range forms(s) {
			add(form)
		}
		if key, ok := strings.CutPrefix(s, whsecPrefix); ok {
			for _, form := range forms(key) {
				add(form)
			}
		}
	}
	if len(needles) == 0 {
		return nil
	}
	// Longest first, so that a secret that contains another is masked whole.
	sort.SliceStable(needles, func(i, j int) bool { return len(needles[i]) > len(needles[j]) })
	return &Redactor{needles: needles}
}

// With returns a Redactor that masks r's secrets and secrets (with their
// encodings, as New takes them); r itself is left as it is. It returns r
// when secrets adds nothing to mask, and nil when neither has anything.
func (r *Redactor) With(secrets ...string) *Redactor {
	add := New(secrets...)
	if add == nil {
		return r
	}
	if r == nil {
		return add
	}
	seen := map[string]bool{}
	var needles []string
	for _, n := range append(append([]string(nil), r.needles...), add.needles...) {
		if !seen[n] {
			seen[n] = true
			needles = append(needles, n)
		}
	}
	sort.SliceStable(needles, func(i, j int) bool { return len(needles[i]) > len(needles[j]) })
	return &Redactor{needles: needles}
}

// forms returns s and the encodings of it worth masking.
func forms(s string) []string {
	out := []string{s,
		base64.RawStdEncoding.EncodeToString([]byte(s)), // a prefix of the padded form
		base64.RawURLEncoding.EncodeToString([]byte(s)),
		url.QueryEscape(s),
	}
	// JSON string escaping, with and without the HTML-safe \u0026 forms,
	// each also with "/" written "\/", as encoders that escape it write
	// it (PHP's json_encode, by default): a base64 token holds "/".
	var js []string
	if b, err := json.Marshal(s); err == nil {
		js = append(js, string(b[1:len(b)-1]))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		j := strings.TrimSuffix(b.String(), "\n")
		js = append(js, j[1:len(j)-1])
	}
	for _, j := range js {
		out = append(out, j)
		if strings.Contains(j, "/") {
			out = append(out, strings.ReplaceAll(j, "/", `\/`))
		}
	}
	return out
}

// Longest returns the length of the longest string r masks (0 for nil).
// A caller that keeps only the end of a stream keeps at least this many
// bytes before the part it shows, so that Tail can mask a secret the cut
// would split.
func (r *Redactor) Longest() int {
	if r == nil {
		return 0
	}
	return len(r.needles[0])
}

// String returns s with every occurrence of a secret replaced by Mask.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r.mask(s, r.spans(s), 0)
}

// holds reports whether s holds a secret r masks.
func (r *Redactor) holds(s string) bool {
	if r == nil || s == "" {
		return false
	}
	for _, needle := range r.needles {
		if strings.Contains(s, needle) {
			return true
		}
	}
	return false
}

// Tail returns the masked end of s: its last n bytes, reaching further back
// when a secret starts before them and ends inside them, so that the secret
// is masked whole rather than shown in part. Text before the last
// n+Longest()-1 bytes of s is context only: a secret cut off by s's own
// start is not shown.
func (r *Redactor) Tail(s string, n int) string {
	if n >= len(s) {
		return r.String(s)
	}
	start := len(s) - n
	if r == nil {
		return s[start:]
	}
	spans := r.spans(s)
	for _, sp := range spans {
		if sp[0] < start && sp[1] > start {
			start = sp[0]
		}
	}
	return r.mask(s, spans, start)
}

// spans returns the byte ranges of s that hold a secret, sorted and merged.
func (r *Redactor) spans(s string) [][2]int {
	var spans [][2]int
	for _, needle := range r.needles {
		for from := 0; ; {
			i := strings.Index(s[from:], needle)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{from + i, from + i + len(needle)})
			from += i + 1 // overlapping occurrences too
		}
	}
	if len(spans) < 2 {
		return spans
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp[0] <= last[1] {
			last[1] = max(last[1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// mask writes s[start:] with spans replaced by Mask.
func (r *Redactor) mask(s string, spans [][2]int, start int) string {
	if len(spans) == 0 {
		return s[start:]
	}
	var b strings.Builder
	at := start
	for _, sp := range spans {
		if sp[1] <= at {
			continue
		}
		if sp[0] > at {
			b.WriteString(s[at:sp[0]])
		}
		b.WriteString(Mask)
		at = sp[1]
	}
	b.WriteString(s[at:])
	return b.String()
}

// Error returns err with its text masked. The result still matches err (and
// what err wraps) for errors.Is and errors.As; only Error() changes. A nil
// err or a Redactor with nothing to mask returns err itself.
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	text := err.Error()
	masked := r.String(text)
	if masked == text {
		return err
	}
	return &maskedError{text: masked, err: err}
}

// maskedError is an error whose text was masked.
type maskedError struct {
	text string
	err  error
}

func (e *maskedError) Error() string { return e.text }
func (e *maskedError) Unwrap() error { return e.err }
