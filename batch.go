package hookbox

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// DistinctDeliveries groups a batch by (Source, DeliveryID) for a Store's
// Ingest. It returns the indexes of the first entry of each key, in order, and
// for every entry the index of the first entry with its key. A store inserts
// only the distinct entries and then calls CopyRepeats, so two copies of one
// delivery inside one batch yield one row: the first new, the rest duplicates.
func DistinctDeliveries(ds []Delivery) (distinct []int, first []int) {
	type key struct{ source, id string }
	first = make([]int, len(ds))
	seen := make(map[key]int, len(ds))
	distinct = make([]int, 0, len(ds))
	for i := range ds {
		k := key{ds[i].Source, ds[i].DeliveryID}
		if j, ok := seen[k]; ok {
			first[i] = j
			continue
		}
		seen[k] = i
		first[i] = i
		distinct = append(distinct, i)
	}
	return distinct, first
}

// CopyRepeats fills the receipt of every repeated entry from the receipt of
// the first entry with its key, marking it a duplicate.
func CopyRepeats(rs []Receipt, first []int) {
	for i, j := range first {
		if i != j {
			rs[i] = Receipt{ID: rs[j].ID, Duplicate: true}
		}
	}
}

// EncodeHeader encodes h as the JSON object a store keeps for forwarding:
// names in sorted order, each with its list of values. A name or value
// that is UTF-8 text is written as encoding/json writes it (without
// reflection, as this runs once per stored delivery). JSON strings hold
// text only, and encoding/json would put U+FFFD in place of every byte
// that is not UTF-8 (net/http accepts such obs-text bytes, as Latin-1 é,
// in a value); so such a string, and one that starts with rawPrefix, is
// written as rawPrefix and the standard base64 of its bytes instead, which
// DecodeHeader turns back into those bytes. The header forwarded is then
// the header received, byte for byte.
func EncodeHeader(h http.Header) []byte {
	if h == nil {
		return []byte("null")
	}
	names := make([]string, 0, len(h))
	size := 2
	for k, vs := range h {
		names = append(names, k)
		size += len(k) + 6
		for _, v := range vs {
			size += len(v) + 3
		}
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHeaderString(b, k)
		b = append(b, ':')
		vs := h[k]
		if vs == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendHeaderString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// rawPrefix starts a stored header string that stands for bytes, written
// as base64 after it (see EncodeHeader). No header received over HTTP can
// start with it: net/http refuses a name that is not a token and a value
// holding a control character other than tab (httpguts.ValidHeaderFieldName
// and ValidHeaderFieldValue, for HTTP/1 and HTTP/2 alike). PostgreSQL's
// jsonb takes it, as it would not \u0000 or a lone surrogate.
const rawPrefix = "\x01"

// appendHeaderString appends s, a header name or value, as EncodeHeader
// writes it: a JSON string of s when s is UTF-8 text that does not start
// with rawPrefix, else one of rawPrefix and the base64 of s.
func appendHeaderString(b []byte, s string) []byte {
	if utf8.ValidString(s) && !strings.HasPrefix(s, rawPrefix) {
		return appendJSONString(b, s)
	}
	b = append(b, `"\u0001`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(s))
	return append(b, '"')
}

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c) // multi-byte runes are copied byte by byte
		}
	}
	return append(b, '"')
}

// headerString returns what s, a string of a stored header as JSON
// decodes it, stands for: the bytes a string of rawPrefix and base64 was
// written for, else s itself. Only what appendHeaderString writes is
// decoded (canonical padded base64 of bytes it would not have written as
// text), so that two stored strings never stand for the same bytes; any
// other string starting with rawPrefix, such as one an older hookbox
// stored for a header set through the Go API, is kept as it is.
func headerString(s string) string {
	enc, ok := strings.CutPrefix(s, rawPrefix)
	if !ok || strings.ContainsAny(enc, "\r\n") { // Strict still skips line breaks
		return s
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil || (utf8.Valid(raw) && !strings.HasPrefix(string(raw), rawPrefix)) {
		return s
	}
	return string(raw)
}

// rawHeaderStrings replaces, in h as encoding/json decoded it, every name
// and value written as rawPrefix and base64 with its bytes. A decoded name
// cannot be another's: text is stored as itself and bytes only so.
func rawHeaderStrings(h http.Header) http.Header {
	var renamed []string
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = headerString(v)
		}
		if strings.HasPrefix(k, rawPrefix) {
			renamed = append(renamed, k)
		}
	}
	for _, k := range renamed {
		if name := headerString(k); name != k {
			h[name] = h[k]
			delete(h, k)
		}
	}
	return h
}

// DecodeHeader reads what EncodeHeader (or encoding/json) made of a
// header, a string of rawPrefix and base64 as the bytes it stands for. The
// common shape, strings without escapes but that prefix, is read directly;
// anything else goes through encoding/json.
func DecodeHeader(b []byte) (http.Header, error) {
	if h, ok := decodeHeaderFast(b); ok {
		return h, nil
	}
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return rawHeaderStrings(h), nil
}

// isBase64 reports whether c is in the standard base64 alphabet or its
// padding.
func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}

// decodeHeaderFast parses {"Name":["v",…],…}, with or without spaces
// between tokens (PostgreSQL's jsonb prints them) but with no escapes in
// strings other than the \u0001 that starts a string of rawPrefix and
// base64 (decoded as DecodeHeader does); it reports false for anything
// else.
func decodeHeaderFast(b []byte) (http.Header, bool) {
	i := 0
	space := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
	}
	// next skips spaces and reports whether the next byte is c, taking it.
	next := func(c byte) bool {
		space()
		if i < len(b) && b[i] == c {
			i++
			return true
		}
		return false
	}
	str := func() (string, bool) {
		space()
		if i >= len(b) || b[i] != '"' {
			return "", false
		}
		if rest := b[i+1:]; len(rest) >= 6 && string(rest[:6]) == `\u0001` {
			for j := i + 7; j < len(b); j++ {
				if c := b[j]; c == '"' {
					s := headerString(rawPrefix + string(b[i+7:j]))
					i = j + 1
					return s, true
				} else if !isBase64(c) {
					return "", false
				}
			}
			return "", false
		}
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				s := b[i+1 : j]
				if !utf8.Valid(s) {
					return "", false
				}
				i = j + 1
				return string(s), true
			case c == '\\' || c < 0x20:
				return "", false
			}
		}
		return "", false
	}
	if !next('{') {
		return nil, false
	}
	h := http.Header{}
	if !next('}') {
		for {
			name, ok := str()
			if !ok || !next(':') || !next('[') {
				return nil, false
			}
			vs := []string{}
			if !next(']') {
				for {
					v, ok := str()
					if !ok {
						return nil, false
					}
					vs = append(vs, v)
					if next(']') {
						break
					}
					if !next(',') {
						return nil, false
					}
				}
			}
			if _, dup := h[name]; dup {
				return nil, false // let encoding/json decide what a repeat means
			}
			h[name] = vs
			if next('}') {
				break
			}
			if !next(',') {
				return nil, false
			}
		}
	}
	space()
	return h, i == len(b)
}
