package hookbox

import (
	"encoding/json"
	"net/http"
	"slices"
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
// names in sorted order, each with its list of values. It is what
// encoding/json makes of an http.Header (invalid UTF-8 becomes U+FFFD),
// without reflection, as it runs once per stored delivery.
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
		b = appendJSONString(b, k)
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
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// DecodeHeader reads what EncodeHeader (or encoding/json) made of a
// header. The common shape, strings without escapes, is read directly;
// anything else goes through encoding/json.
func DecodeHeader(b []byte) (http.Header, error) {
	if h, ok := decodeHeaderFast(b); ok {
		return h, nil
	}
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// decodeHeaderFast parses {"Name":["v",…],…}, with or without spaces
// between tokens (PostgreSQL's jsonb prints them) but with no escapes in
// strings; it reports false for anything else.
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
