package verify

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small single-pass JSON scanner that validates a whole
// document and picks the raw values of a few top-level keys of an object.
// It exists because the id and the event type are needed on every
// request, and encoding/json scans the document twice and reflects; this
// runs in one pass without allocating. FuzzJSONFields checks it against
// encoding/json: on every input it must agree with decoding into
// map[string]json.RawMessage (exact key match, the last duplicate wins,
// escaped keys are unescaped, invalid JSON is rejected); FuzzKeyEquals
// checks the comparison of escaped keys on its own.

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonFields scans body, which must be one JSON object, and returns the raw
// values of the top-level keys a and b (the last occurrence wins). An empty
// key name is not looked for. ok is false when body is not valid JSON or
// not an object; the values are nil when the key is absent.
func jsonFields(body []byte, a, b string) (va, vb []byte, ok bool) {
	names := [2]string{a, b}
	var vals [2][]byte
	if !jsonMembers(body, names[:], vals[:]) {
		return nil, nil, false
	}
	return vals[0], vals[1], true
}

// jsonMembers is jsonFields for any number of names, in one pass: it sets
// vals[i] to the raw value of the top-level key names[i] (the last
// occurrence wins; an empty name is not looked for) and reports whether
// body is one valid JSON object. vals holds at least len(names) values,
// nil on entry.
func jsonMembers(body []byte, names []string, vals [][]byte) bool {
	s := jsonScanner{data: body}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return false
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
	} else {
		for {
			if s.pos >= len(s.data) || s.data[s.pos] != '"' {
				return false
			}
			kStart := s.pos
			escaped, good := s.skipString()
			if !good {
				return false
			}
			key := s.data[kStart:s.pos]
			s.skipSpace()
			if s.pos >= len(s.data) || s.data[s.pos] != ':' {
				return false
			}
			s.pos++
			s.skipSpace()
			vStart := s.pos
			if !s.skipValue(2) {
				return false
			}
			for i, name := range names {
				if name != "" && keyEquals(key, escaped, name) {
					vals[i] = s.data[vStart:s.pos]
				}
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				return false
			}
			c := s.data[s.pos]
			s.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return false
			}
			s.skipSpace()
		}
	}
	s.skipSpace()
	return s.pos == len(s.data)
}

// maxPathDepth bounds the segments of a dotted field path.
const maxPathDepth = 8

// jsonPaths is jsonFields for dotted paths ("event.type" is the "type" of
// the object under the top-level "event"): it returns the raw values at
// paths a and b ("" is not looked for; a value is nil when its path is
// absent or crosses something that is not an object). ok is false when
// body is not a valid JSON object. Paths without dots cost one pass.
func jsonPaths(body []byte, a, b string) (va, vb []byte, ok bool) {
	headA, restA, nestedA := strings.Cut(a, ".")
	headB, restB, nestedB := strings.Cut(b, ".")
	va, vb, ok = jsonFields(body, headA, headB)
	if !ok {
		return nil, nil, false
	}
	if nestedA {
		va = jsonDescend(va, restA)
	}
	if nestedB {
		vb = jsonDescend(vb, restB)
	}
	return va, vb, true
}

// jsonDescend follows the dotted path into raw, an already validated JSON
// value, and returns the value there (nil when there is none, and for a
// path with an empty segment).
func jsonDescend(raw []byte, path string) []byte {
	for depth := 0; raw != nil; depth++ {
		head, rest, more := strings.Cut(path, ".")
		if head == "" || depth == maxPathDepth {
			return nil
		}
		var ok bool
		if raw, _, ok = jsonFields(raw, head, ""); !ok || !more {
			return raw
		}
		path = rest
	}
	return nil
}

// keyEquals reports whether the raw JSON string token tok (quotes
// included), which skipString accepted, decodes to name as encoding/json
// decodes it: escapes unescaped, a UTF-16 surrogate pair joined, and a
// lone surrogate or each byte of invalid UTF-8 replaced by U+FFFD. The
// body being unauthenticated when mailgun's signature is looked for, it
// allocates nothing and decodes no further than name: a key decodes to
// at least a sixth of its bytes (an escape of six bytes to one) and at
// most three times as many (an invalid byte to U+FFFD), so a key whose
// length rules name out is not decoded at all, and the decoding stops at
// the first byte that differs.
func keyEquals(tok []byte, escaped bool, name string) bool {
	inner := tok[1 : len(tok)-1]
	if len(inner) > 6*len(name) || 3*len(inner) < len(name) {
		return false
	}
	if !escaped {
		if string(inner) == name {
			return utf8.ValidString(name)
		}
		if utf8.Valid(inner) {
			return false
		}
	}
	return unquoteEquals(inner, name)
}

// replacement is U+FFFD in UTF-8, what encoding/json decodes a lone
// surrogate and each byte of invalid UTF-8 to.
var replacement = [...]byte{0xef, 0xbf, 0xbd}

// unquoteEquals reports whether s, the inside of a JSON string token that
// skipString accepted, decodes to name (see keyEquals).
func unquoteEquals(s []byte, name string) bool {
	j := 0 // the bytes of name matched so far
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && s[i+1] == 'u':
			r := u4(s[i:])
			i += 6
			if utf16.IsSurrogate(r) {
				if pair := utf16.DecodeRune(r, u4(s[i:])); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			var buf [utf8.UTFMax]byte
			enc := utf8.AppendRune(buf[:0], r)
			if !strings.HasPrefix(name[j:], string(enc)) {
				return false
			}
			j += len(enc)
			continue
		case c == '\\':
			c = unescapeByte(s[i+1])
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			enc := s[i : i+size]
			if r == utf8.RuneError && size == 1 {
				enc = replacement[:]
			}
			if !strings.HasPrefix(name[j:], string(enc)) {
				return false
			}
			i, j = i+size, j+len(enc)
			continue
		}
		if j >= len(name) || name[j] != c {
			return false
		}
		j++
	}
	return j == len(name)
}

// u4 decodes the escape \uXXXX at the start of s, or returns -1 when s
// does not start with one.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unescapeByte is the byte a one-letter escape (\n, \", …) stands for.
func unescapeByte(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\', '/'
}

// jsonString decodes a raw value that is a JSON string; ok is false for any
// other kind of value. Unlike encoding/json, it loses nothing: a byte that
// is not UTF-8 is kept as it is, and an escaped lone surrogate (\ud800)
// becomes the three bytes that would encode it, which are not UTF-8
// either. Two strings that differ decode to two texts, never to one with
// U+FFFD in both places: a delivery id so decoded is then refused as not
// UTF-8 text, where a replaced one would have been taken for another
// delivery's, and acknowledged as its duplicate.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if !containsBackslash(inner) {
		return string(inner), true
	}
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); {
		c := inner[i]
		switch {
		case c != '\\':
			out = append(out, c)
			i++
			continue
		case i+1 >= len(inner):
			return "", false
		case inner[i+1] != 'u':
			out = append(out, unescapeByte(inner[i+1]))
			i += 2
			continue
		}
		r := u4(inner[i:])
		if r < 0 {
			return "", false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if pair := utf16.DecodeRune(r, u4(inner[i:])); pair != utf8.RuneError {
				out = utf8.AppendRune(out, pair)
				i += 6
				continue
			}
			// A lone surrogate: its three bytes, which utf8.Valid refuses.
			out = append(out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out), true
}

func containsBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// jsonScalarText returns the text of a raw string value (decoded) or number
// value (its literal text); ok is false for objects, arrays, booleans and
// null.
func jsonScalarText(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	if c := raw[0]; c == '-' || (c >= '0' && c <= '9') {
		return string(raw), true
	}
	return jsonString(raw)
}

type jsonScanner struct {
	data []byte
	pos  int
	// objects has a bit per container open in skipValue, set for an
	// object: skipValue loops instead of recursing, so that a body nested
	// maxJSONDepth deep costs these 1,256 bytes, not a stack frame per
	// level (512 KiB of stack for 20 KB of brackets). Bits are written as
	// containers open, so the array is never cleared.
	objects [maxJSONDepth/64 + 1]uint64
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// skipValue skips one value starting at s.pos (no leading space). depth is
// the nesting depth a container starting here would have. It runs in one
// loop, whatever the nesting (see objects).
func (s *jsonScanner) skipValue(depth int) bool {
	open := 0 // containers open within the value; the innermost at depth+open-1
	for {
		// A value starts at s.pos.
		if s.pos >= len(s.data) {
			return false
		}
		switch c := s.data[s.pos]; {
		case c == '"':
			if _, ok := s.skipString(); !ok {
				return false
			}
		case c == '{' || c == '[':
			if depth+open > maxJSONDepth {
				return false
			}
			bit := uint64(1) << (open % 64)
			s.objects[open/64] &^= bit
			if c == '{' {
				s.objects[open/64] |= bit
			}
			open++
			s.pos++
			s.skipSpace()
			if s.pos < len(s.data) && (c == '{' && s.data[s.pos] == '}' || c == '[' && s.data[s.pos] == ']') {
				s.pos++
				open--
				break
			}
			if c == '{' && !s.skipName() {
				return false
			}
			continue
		case c == '-' || (c >= '0' && c <= '9'):
			if !s.skipNumber() {
				return false
			}
		case c == 't':
			if !s.skipLiteral("true") {
				return false
			}
		case c == 'f':
			if !s.skipLiteral("false") {
				return false
			}
		case c == 'n':
			if !s.skipLiteral("null") {
				return false
			}
		default:
			return false
		}
		// A value ended: what follows closes containers, or leads to the
		// next value of the innermost.
		for {
			if open == 0 {
				return true
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				return false
			}
			object := s.objects[(open-1)/64]&(1<<((open-1)%64)) != 0
			c := s.data[s.pos]
			s.pos++
			if c == '}' && object || c == ']' && !object {
				open--
				continue
			}
			if c != ',' {
				return false
			}
			s.skipSpace()
			if object && !s.skipName() {
				return false
			}
			break
		}
	}
}

// skipName skips a member's name and its colon, and the white space after
// them, from s.pos (no leading space).
func (s *jsonScanner) skipName() bool {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return false
	}
	if _, ok := s.skipString(); !ok {
		return false
	}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return false
	}
	s.pos++
	s.skipSpace()
	return true
}

func (s *jsonScanner) skipLiteral(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return false
	}
	s.pos += len(lit)
	return true
}

// strPlain marks the bytes that a string scan can pass over without
// looking closer: everything but control characters, '"' and '\\'.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString skips a string token starting at the opening quote. escaped
// reports that the token holds at least one escape sequence.
func (s *jsonScanner) skipString() (escaped, ok bool) {
	d, i := s.data, s.pos+1
	for {
		for i < len(d) && strPlain[d[i]] {
			i++
		}
		if i >= len(d) {
			return false, false
		}
		switch d[i] {
		case '"':
			s.pos = i + 1
			return escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(d) {
				return false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) {
					return false, false
				}
				for _, h := range d[i+2 : i+6] {
					if !isHex(h) {
						return false, false
					}
				}
				i += 6
			default:
				return false, false
			}
		default: // a control character
			return false, false
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *jsonScanner) skipNumber() bool {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		n := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == n {
			return false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		n := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == n {
			return false
		}
	}
	s.pos = i
	return true
}
