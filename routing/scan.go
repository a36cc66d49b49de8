package routing

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads values out of a JSON body where they lie, without
// decoding the rest: a body of a megabyte of [{},{},…] decoded into Go
// values took some fifty times its size. valid checks the body once, as
// json.Valid would; every other function takes a body valid accepted and
// an index at the start of a value (no white space before it), so none
// checks the syntax again. What they return is what encoding/json gives
// for the same value (UseNumber, decoding into any): the fuzz tests
// FuzzValid and FuzzFindMatchesDecode compare the two.

// part is one step of a dotted path: an object member's name, and the
// array index that name reads as (strconv.Atoi, as the decoded lookup
// read it), or -1 when it reads as none.
type part struct {
	name  string
	index int
}

// parsePath splits a dotted path into its parts.
func parsePath(p string) []part {
	names := strings.Split(p, ".")
	parts := make([]part, len(names))
	for k, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 {
			i = -1
		}
		parts[k] = part{name: n, index: i}
	}
	return parts
}

// find returns the index of the value at path in body, and whether there
// is one. As in a decoded object, the last member of a name counts.
// scratch holds escaped names while they are compared.
func find(body []byte, path []part, scratch *[]byte) (int, bool) {
	i := skipSpace(body, 0)
	for _, p := range path {
		switch body[i] {
		case '{':
			found := -1
			i = skipSpace(body, i+1)
			for body[i] != '}' {
				start := i
				i = skipString(body, i)
				name := body[start+1 : i-1]
				i = skipSpace(body, skipSpace(body, i)+1) // past the colon
				if sameName(name, p.name, scratch) {
					found = i
				}
				i = skipSpace(body, skipValue(body, i))
				if body[i] == ',' {
					i = skipSpace(body, i+1)
				}
			}
			if found < 0 {
				return 0, false
			}
			i = found
		case '[':
			if p.index < 0 {
				return 0, false
			}
			i = skipSpace(body, i+1)
			for n := 0; n < p.index; n++ {
				if body[i] == ']' {
					return 0, false
				}
				i = skipSpace(body, skipValue(body, i))
				if body[i] == ',' {
					i = skipSpace(body, i+1)
				}
			}
			if body[i] == ']' {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	return i, true
}

// sameName reports whether the raw (still escaped) member name is name.
func sameName(raw []byte, name string, scratch *[]byte) bool {
	if plain(raw) {
		return string(raw) == name
	}
	if len(raw) > 6*len(name) { // each decoded byte comes from at most six raw ones
		return false
	}
	*scratch = unquote((*scratch)[:0], raw)
	return string(*scratch) == name
}

// plain reports whether a string's raw bytes are its decoded value: no
// escape, and valid UTF-8 (the decoder replaces each invalid byte by
// U+FFFD).
func plain(raw []byte) bool {
	return bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw)
}

// text returns the value at i as text, as decoded lookup gave it: a string
// decoded, a number, boolean or null as its JSON text, an object or array
// as compact JSON as json.Marshal writes it. A value whose text is longer
// than limit bytes is only compared with values of limit bytes at most,
// so its text is not needed: for an object or array ok is then false, and
// for a string it may be, with no work spent on it.
func text(body []byte, i, limit int) (string, bool) {
	switch body[i] {
	case '"':
		raw := body[i+1 : skipString(body, i)-1]
		if len(raw) > 6*limit { // each decoded byte comes from at most six raw ones
			return "", false
		}
		if plain(raw) {
			return string(raw), true
		}
		return string(unquote(make([]byte, 0, len(raw)), raw)), true
	case '{', '[':
		out, _, ok := compact(body, i, nil, limit)
		return string(out), ok
	}
	end := skipValue(body, i)
	if end-i > limit {
		return "", false // a number of a megabyte is not copied to be compared
	}
	return string(body[i:end]), true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(body []byte, i int) int {
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at i.
func skipString(body []byte, i int) int {
	i++
	for {
		q := i + bytes.IndexByte(body[i:], '"')
		escaped := false
		for k := q - 1; k >= i && body[k] == '\\'; k-- {
			escaped = !escaped
		}
		if !escaped {
			return q + 1
		}
		i = q + 1
	}
}

// skipValue returns the index just past the value that starts at i.
func skipValue(body []byte, i int) int {
	switch body[i] {
	case '"':
		return skipString(body, i)
	case '{', '[':
		return skipRest(body, i+1)
	}
	for i < len(body) && strings.IndexByte(",]} \t\n\r", body[i]) < 0 {
		i++
	}
	return i
}

// skipRest returns the index just past the object or array whose content
// goes on at i.
func skipRest(body []byte, i int) int {
	depth := 1
	for {
		switch body[i] {
		case '"':
			i = skipString(body, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
}

// member is an object member as compact writes it.
type member struct {
	name  string
	value []byte
	fits  bool
}

// compact appends to out the compact JSON that json.Marshal writes for the
// decoded value at i (members sorted by name, the last of a name kept,
// strings escaped as Marshal escapes them), and returns the index just
// past the value. fits is false when the value's JSON would be longer than
// limit bytes; what was appended is then meaningless. The work and memory
// spent on a value are bounded by limit: a nested value is given the limit
// less its brackets, and a name or value past it is skipped, not written.
func compact(body []byte, i int, out []byte, limit int) (_ []byte, end int, fits bool) {
	switch body[i] {
	case '"':
		end = skipString(body, i)
		raw := body[i+1 : end-1]
		if len(raw) > 6*limit { // each decoded byte comes from at most six raw ones
			return out, end, false
		}
		out = appendString(out, unquote(nil, raw))
		return out, end, len(out) <= limit
	case '[':
		if limit < 2 {
			return out, skipRest(body, i+1), false
		}
		start := len(out)
		out = append(out, '[')
		i = skipSpace(body, i+1)
		for body[i] != ']' {
			if len(out) > start+1 {
				out = append(out, ',')
			}
			var ok bool
			out, i, ok = compact(body, i, out, limit-(len(out)-start)-1)
			if !ok {
				return out, skipRest(body, i), false
			}
			if i = skipSpace(body, i); body[i] == ',' {
				i = skipSpace(body, i+1)
			}
		}
		out = append(out, ']')
		return out, i + 1, len(out)-start <= limit
	case '{':
		if limit < 2 {
			return out, skipRest(body, i+1), false
		}
		var members []member
		at := map[string]int{} // a member's index in members, by name
		var name []byte        // the name being read, decoded
		// names is the shortest the object's JSON can be with the members
		// named so far: its braces, and each member's name, quotes and
		// colon, a value of a byte, and the comma between two members.
		names := 1
		i = skipSpace(body, i+1)
		for body[i] != '}' {
			nameEnd := skipString(body, i)
			raw := body[i+1 : nameEnd-1]
			if len(raw) > 6*limit {
				return out, skipRest(body, nameEnd), false
			}
			name = unquote(name[:0], raw)
			i = skipSpace(body, skipSpace(body, nameEnd)+1)
			k, seen := at[string(name)]
			if !seen {
				// A name stays however many times it comes again: once the
				// names alone pass the limit, the object does.
				if names += len(name) + 5; names > limit {
					return out, skipRest(body, i), false
				}
				members = append(members, member{name: string(name)})
				k = len(members) - 1
				at[members[k].name] = k
			}
			// The last value of a name counts: one that comes again is
			// written over the one before, in its buffer.
			members[k].value, i, members[k].fits = compact(body, i, members[k].value[:0], limit-names+1)
			if i = skipSpace(body, i); body[i] == ',' {
				i = skipSpace(body, i+1)
			}
		}
		end = i + 1
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		start := len(out)
		out = append(out, '{')
		for k, m := range members {
			if !m.fits {
				return out, end, false
			}
			if k > 0 {
				out = append(out, ',')
			}
			out = appendString(out, []byte(m.name))
			out = append(out, ':')
			out = append(out, m.value...)
			if len(out)-start > limit {
				return out, end, false
			}
		}
		out = append(out, '}')
		return out, end, len(out)-start <= limit
	}
	end = skipValue(body, i)
	if end-i > limit {
		return out, end, false
	}
	out = append(out, body[i:end]...)
	return out, end, true
}

// unquote appends the decoded value of a JSON string's raw bytes (between
// its quotes) to dst, as encoding/json decodes it: escapes resolved, and
// each invalid UTF-8 byte or lone surrogate replaced by U+FFFD.
func unquote(dst, raw []byte) []byte {
	for r := 0; r < len(raw); {
		c := raw[r]
		switch {
		case c == '\\':
			switch e := raw[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(raw[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(raw) && raw[r] == '\\' && raw[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(raw[r+2:])); dec != unicode.ReplacementChar {
							dst = utf8.AppendRune(dst, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as json.Marshal
// escapes it (HTML characters, U+2028 and U+2029 included).
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\\' || c == '"':
				dst = append(dst, '\\', c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < ' ' || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		rr, size := utf8.DecodeRune(s[i:])
		switch {
		case rr == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case rr == '\u2028' || rr == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[rr&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// maxDepth is how deeply encoding/json lets arrays and objects nest.
const maxDepth = 10000

// valid reports whether body is one JSON value, with white space around
// it at most, exactly as json.Valid does, without its memory: json.Valid
// keeps a word per level of nesting (some 350 KB for a body of 20 KB
// nested 10,000 deep), valid a bit.
func valid(body []byte) bool {
	var objects [maxDepth/64 + 1]uint64 // bit d: the container at depth d+1 is an object
	inObject := func(depth int) bool { return objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0 }
	depth := 0
	i := skipSpace(body, 0)
	for {
		// A value starts at i.
		if i >= len(body) {
			return false
		}
		switch c := body[i]; c {
		case '{', '[':
			if depth++; depth > maxDepth {
				return false
			}
			bit := uint64(1) << ((depth - 1) % 64)
			objects[(depth-1)/64] &^= bit
			if c == '{' {
				objects[(depth-1)/64] |= bit
			}
			i = skipSpace(body, i+1)
			if i < len(body) && (c == '{' && body[i] == '}' || c == '[' && body[i] == ']') {
				depth--
				i++
				break
			}
			if c == '{' {
				if i = validName(body, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			if i = validString(body, i); i < 0 {
				return false
			}
		case 't':
			if !bytes.HasPrefix(body[i:], []byte("true")) {
				return false
			}
			i += 4
		case 'f':
			if !bytes.HasPrefix(body[i:], []byte("false")) {
				return false
			}
			i += 5
		case 'n':
			if !bytes.HasPrefix(body[i:], []byte("null")) {
				return false
			}
			i += 4
		default:
			if i = validNumber(body, i); i < 0 {
				return false
			}
		}
		// A value ended at i: what follows closes containers, or leads
		// to the next value.
		for {
			i = skipSpace(body, i)
			if depth == 0 {
				return i == len(body)
			}
			if i >= len(body) {
				return false
			}
			object := inObject(depth)
			if c := body[i]; c == '}' && object || c == ']' && !object {
				depth--
				i++
				continue
			}
			if body[i] != ',' {
				return false
			}
			i = skipSpace(body, i+1)
			if object {
				if i = validName(body, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// validName returns the index of the value after the member name and
// colon at i, or -1 when there is none.
func validName(body []byte, i int) int {
	if i >= len(body) || body[i] != '"' {
		return -1
	}
	if i = validString(body, i); i < 0 {
		return -1
	}
	if i = skipSpace(body, i); i >= len(body) || body[i] != ':' {
		return -1
	}
	return skipSpace(body, i+1)
}

// validString returns the index just past the JSON string at i, or -1 when
// it is not one.
func validString(body []byte, i int) int {
	for i++; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			return i + 1
		case c < ' ':
			return -1
		case c == '\\':
			if i++; i >= len(body) {
				return -1
			}
			switch body[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(body) {
					return -1
				}
				for _, h := range body[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// validNumber returns the index just past the JSON number at i, or -1
// when there is none.
func validNumber(body []byte, i int) int {
	digits := func(i int) int {
		for i < len(body) && '0' <= body[i] && body[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(body) && body[i] == '-' {
		i++
	}
	switch {
	case i < len(body) && body[i] == '0':
		i++
	case i < len(body) && '1' <= body[i] && body[i] <= '9':
		i = digits(i + 1)
	default:
		return -1
	}
	if i < len(body) && body[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(body) && (body[i] == 'e' || body[i] == 'E') {
		i++
		if i < len(body) && (body[i] == '+' || body[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}
