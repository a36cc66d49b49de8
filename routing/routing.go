// Package routing decides which of a source's named targets an event goes
// to, and the order key of each delivery.
//
// Guarantees:
//   - Matching depends only on what was verified and stored (the event
//     type, the request headers, the raw body), so the same event always
//     gets the same routes.
//   - The body is read only when a rule reads it (match, or order_by a
//     JSON path), and only the values at the rules' paths are decoded; the
//     rest is checked and skipped where it lies. So routing allocates a
//     small part of the body, whatever it holds: the values read, and an
//     object or array at a match path only as far as the longest value
//     accepted there. A body that is not one JSON value (white space
//     around it aside) matches no JSON rule and gives no order key; it is
//     never an error: the event is stored either way.
//   - An order key a store refuses (longer than hookbox.MaxOrderKeyLength,
//     not valid UTF-8, or holding a NUL byte: hookbox.StorableOrderKey), or
//     one holding a control character, is replaced by "sha256:" and its
//     SHA-256 (hex), so a sender cannot make hookbox store large keys, nor
//     keys a store refuses (which would refuse the verified delivery), nor
//     keys that drive the terminal of an operator reading a log line that
//     names one, and equal keys stay equal. So is a value that starts with
//     "sha256:" or NoKeyPrefix: no value a sender chooses is stored as a hashed key or
//     as the key of a delivery without the value, so two deliveries with
//     the value share a key only if their values are equal (barring a
//     SHA-256 collision), and one without it shares its key with none.
//   - Every delivery of a target with order_by has a key: one whose event
//     lacks the value gets a key of its own, NoKeyPrefix and its delivery
//     id (NoKeyPrefix and the id's hashed form, when that is too long or
//     not storable), so it waits for no other. A JSON null, object or
//     array at the order_by path, or an empty string or header, counts as
//     lacking the value: it names no one thing that events share, so a run
//     of events without a customer (null) neither waits in one line nor is
//     held by a dead one among them.
package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/hookbox/hookbox"
)

// NoKeyPrefix starts the key of a delivery whose event lacks its target's
// order_by value.
const NoKeyPrefix = "(none):"

// Rule is one target's filter and order key. Every set part must match:
// Types (any glob), each Match path (any of its values), each Headers name
// (any of its values). A rule with no parts matches every event.
type Rule struct {
	Target string
	// Types are event-type globs (path.Match syntax: "order.*").
	Types []string
	// Match maps a JSON path ("data.object.status", "items.0.sku") to the
	// values accepted there. A string is compared as it is; a number,
	// boolean or null as its JSON text; an object or array as compact
	// JSON, as json.Marshal writes it decoded (members sorted by name).
	// Where an object has a name twice, on a path or in a value, the last
	// member counts.
	Match map[string][]string
	// Headers maps a header name to the values accepted.
	Headers map[string][]string
	// OrderBy is "header:NAME" or a JSON path ("json:PATH", or the path
	// alone): the delivery's order key. "" for none. A string is the key
	// as it is, a number or boolean its JSON text; null, an object or an
	// array gives no key, as a missing value does.
	OrderBy string
}

// Check reports the first thing wrong with r, for config validation. A
// path or header name that could never match is refused, with the
// accepted syntax and the likely fix: a JSON path is field names joined
// by dots, array indexes as numbers (data.items.0.sku), not JSONPath
// ($.data.id, data[0].id); a header is "header:NAME", lower-case prefix,
// no space.
func (r Rule) Check() error {
	for _, g := range r.Types {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("types: %q is not a valid glob", g)
		}
	}
	for p := range r.Match {
		if err := checkMatchPath(p); err != nil {
			return fmt.Errorf("match: %w", err)
		}
	}
	for h := range r.Headers {
		if h == "" {
			return fmt.Errorf("headers: a header name is empty")
		}
		if err := checkHeaderName(h); err != nil {
			return fmt.Errorf("headers: %w", err)
		}
	}
	if r.OrderBy != "" {
		if err := checkOrderBy(r.OrderBy); err != nil {
			return fmt.Errorf("order_by: %w", err)
		}
	}
	return nil
}

// pathSyntax is the accepted syntax of a JSON path, for messages.
const pathSyntax = "a JSON path is field names joined by dots, array indexes as numbers: data.object.id, items.0.sku"

// orderBySyntax is the accepted syntax of order_by, for messages.
const orderBySyntax = "order_by is header:NAME, with header: in lower case and no space, or a JSON path: data.customer or json:data.customer"

// checkOrderBy checks an order_by value: "header:NAME", "json:PATH" or a
// JSON path alone.
func checkOrderBy(o string) error {
	prefix, rest, colon := strings.Cut(o, ":")
	switch {
	case colon && prefix == "header":
		if rest == "" {
			return fmt.Errorf("header: needs a header name")
		}
		if name := strings.TrimSpace(rest); name != rest && checkHeaderName(name) == nil {
			return fmt.Errorf("%q has a space around the header name, so it never matches: write %q (%s)", o, "header:"+name, orderBySyntax)
		}
		if err := checkHeaderName(rest); err != nil {
			return fmt.Errorf("%w (%s)", err, orderBySyntax)
		}
		return nil
	case colon && prefix == "json":
		return checkPath(rest)
	case colon && isPrefixWord(prefix, "header", "headers"):
		name := strings.TrimSpace(rest)
		return fmt.Errorf("%q is read as a JSON path, so it never matches: write %q, not %q (%s)", o, "header:"+name, o, orderBySyntax)
	case colon && isPrefixWord(prefix, "json"):
		return fmt.Errorf("%q is read as a JSON path, so it never matches: write %q, not %q (%s)", o, "json:"+strings.TrimSpace(rest), o, orderBySyntax)
	}
	return checkPath(o)
}

// isPrefixWord reports whether prefix, spaces and case aside, is one of
// words.
func isPrefixWord(prefix string, words ...string) bool {
	for _, w := range words {
		if strings.EqualFold(strings.TrimSpace(prefix), w) {
			return true
		}
	}
	return false
}

// checkMatchPath checks a path of match, which is always a JSON path:
// headers have a filter of their own.
func checkMatchPath(p string) error {
	if prefix, rest, ok := strings.Cut(p, ":"); ok {
		switch {
		case isPrefixWord(prefix, "header", "headers"):
			return fmt.Errorf("%q never matches: match reads JSON paths of the body only (%s); for a header write headers: {%s: VALUE}", p, pathSyntax, strings.TrimSpace(rest))
		case isPrefixWord(prefix, "json"):
			return fmt.Errorf("%q never matches: a match path is a JSON path already, write %q", p, strings.TrimSpace(rest))
		}
	}
	return checkPath(p)
}

// jsonPathIndex matches a JSONPath bracket ([0], ['id'], ["id"], [*]).
var jsonPathIndex = regexp.MustCompile(`\[\s*(?:'([^']*)'|"([^"]*)"|([^\]]*?))\s*\]`)

// checkPath checks a dotted JSON path, as lookup reads it.
func checkPath(p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, ".."):
		return fmt.Errorf("%q is not a JSON path (%s)", p, pathSyntax)
	case strings.TrimSpace(p) != p:
		return fmt.Errorf("%q has a space before or after it, so it never matches: write %q", p, strings.TrimSpace(p))
	case p == "$" || strings.HasPrefix(p, "$.") || strings.HasPrefix(p, "$["):
		return fmt.Errorf("%q is JSONPath, which hookbox does not read, so it never matches: write %q, not %q (%s)", p, dotted(p), p, pathSyntax)
	case jsonPathIndex.MatchString(p):
		return fmt.Errorf("%q uses brackets, which hookbox does not read, so it never matches: write %q, not %q (%s)", p, dotted(p), p, pathSyntax)
	}
	return nil
}

// dotted rewrites a JSONPath ($.data[0]['id']) as the dotted path hookbox
// reads (data.0.id), for a suggestion.
func dotted(p string) string {
	p = strings.TrimPrefix(p, "$")
	p = jsonPathIndex.ReplaceAllString(p, ".$1$2$3")
	for strings.Contains(p, "..") {
		p = strings.ReplaceAll(p, "..", ".")
	}
	p = strings.Trim(p, ".")
	if p == "" {
		return "data.id"
	}
	return p
}

// checkHeaderName checks that name is an HTTP header name (RFC 9110
// token): any other never arrives, so a rule on it never matches.
func checkHeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("a header name is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		if c == ' ' || c == '\t' {
			return fmt.Errorf("header name %q has a space, so it never matches: write %q", name, strings.Join(strings.Fields(name), "-"))
		}
		return fmt.Errorf("%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~ only), so it never matches", name)
	}
	return nil
}

// Table routes the events of one source.
type Table struct {
	rules []rule
	// paths are the distinct JSON paths the rules read (match and
	// order_by), each found in a body once at most.
	paths    [][]part
	needJSON bool
}

// rule is a Rule with its JSON paths numbered in Table.paths.
type rule struct {
	Rule
	match     []matchPath
	orderPath int // -1 when order_by is not a JSON path
}

// matchPath is one path of a rule's Match: the values accepted there, and
// the longest of them, past which a value need not be read.
type matchPath struct {
	path    int
	want    []string
	longest int
}

// New builds the table of a source's rules, in target order.
func New(rules []Rule) *Table {
	t := &Table{}
	index := map[string]int{}
	pathOf := func(p string) int {
		if k, ok := index[p]; ok {
			return k
		}
		index[p] = len(t.paths)
		t.paths = append(t.paths, parsePath(p))
		return len(t.paths) - 1
	}
	for _, r := range rules {
		c := rule{Rule: r, orderPath: -1}
		for p, want := range r.Match {
			m := matchPath{path: pathOf(p), want: want}
			for _, w := range want {
				m.longest = max(m.longest, len(w))
			}
			c.match = append(c.match, m)
		}
		if r.OrderBy != "" && !strings.HasPrefix(r.OrderBy, "header:") {
			c.orderPath = pathOf(strings.TrimPrefix(r.OrderBy, "json:"))
		}
		t.needJSON = t.needJSON || len(c.match) > 0 || c.orderPath >= 0
		t.rules = append(t.rules, c)
	}
	return t
}

// Routes returns the routes of an event (its type, delivery id, headers
// and body): one per target whose rule matches, in target order.
func (t *Table) Routes(eventType, deliveryID string, h http.Header, body []byte) []hookbox.Route {
	var doc *document
	if t.needJSON && valid(body) {
		doc = &document{body: body, paths: t.paths, at: make([]int, len(t.paths))}
		for k := range doc.at {
			doc.at[k] = unread
		}
	}
	out := make([]hookbox.Route, 0, len(t.rules))
	for _, r := range t.rules {
		if !r.matches(eventType, h, doc) {
			continue
		}
		out = append(out, hookbox.Route{Target: r.Target, OrderKey: r.key(deliveryID, h, doc)})
	}
	return out
}

// document is a JSON body being routed, and where the table's paths lead
// in it. Only the values at those paths are ever decoded (see scan.go).
type document struct {
	body    []byte
	paths   [][]part
	at      []int  // per path: the index of its value, none, or unread
	scratch []byte // escaped member names, while compared
}

const (
	none   = -1
	unread = -2
)

// value returns the index in the body of the value at path k, and whether
// there is one.
func (d *document) value(k int) (int, bool) {
	if d.at[k] == unread {
		d.at[k] = none
		if i, ok := find(d.body, d.paths[k], &d.scratch); ok {
			d.at[k] = i
		}
	}
	return d.at[k], d.at[k] != none
}

func (r *rule) matches(eventType string, h http.Header, doc *document) bool {
	if len(r.Types) > 0 && !anyGlob(r.Types, eventType) {
		return false
	}
	for name, want := range r.Headers {
		if !anyEqual(h.Values(name), want) {
			return false
		}
	}
	for _, m := range r.match {
		if doc == nil {
			return false
		}
		i, ok := doc.value(m.path)
		if !ok {
			return false
		}
		v, ok := text(doc.body, i, m.longest)
		if !ok || !slices.Contains(m.want, v) {
			return false
		}
	}
	return true
}

func (r *rule) key(deliveryID string, h http.Header, doc *document) string {
	var k string
	switch {
	case r.OrderBy == "":
		return ""
	case r.orderPath < 0:
		k = h.Get(strings.TrimPrefix(r.OrderBy, "header:"))
	case doc != nil:
		if i, ok := doc.value(r.orderPath); ok {
			k = keyText(doc.body, i)
		}
	}
	if k == "" {
		return NoValueKey(deliveryID)
	}
	if !storableKey(k) || strings.HasPrefix(k, NoKeyPrefix) || strings.HasPrefix(k, hashPrefix) {
		k = hashKey(k)
	}
	return k
}

// keyText returns the order key the value at i of body gives: a string
// as it is, a number or boolean as its JSON text, and "" (no key) for
// null, an object or an array.
func keyText(body []byte, i int) string {
	switch body[i] {
	case 'n', '{', '[':
		return ""
	}
	k, _ := text(body, i, len(body))
	return k
}

// NoValueKey is the order key of the delivery deliveryID whose event
// lacks its target's order_by value: NoKeyPrefix and the id (NoKeyPrefix
// and the id's hashed form, when that is too long or not storable), a key
// no other delivery of the target shares. The worker gives it too to a
// delivery of an ordered target stored without a key (worker.Controls.ByKey).
func NoValueKey(deliveryID string) string {
	k := NoKeyPrefix + deliveryID
	// A hashed id reads "(none):sha256:…": an id that starts so itself is
	// hashed too, so it cannot take another's key.
	if !storableKey(k) || strings.HasPrefix(deliveryID, hashPrefix) {
		k = NoKeyPrefix + hashKey(deliveryID)
	}
	return k
}

// hashPrefix starts an order key that is the SHA-256 of the value.
const hashPrefix = "sha256:"

// hashKey returns the hashed form of an order key.
func hashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// storableKey reports whether k can be stored as it is: every store takes
// it (hookbox.StorableOrderKey: not too long, valid UTF-8 without NUL, which
// a key from a header's bytes, or a JSON string's \u0000, may lack). Others
// are hashed, so that a verified delivery is never refused for its key
// (hookbox.CheckStorable). So are keys with a control character (C0, DEL or C1: a
// JSON string's \u001b or \u009b, a header's UTF-8 bytes), the rule
// ingest applies to event types (hookbox.NotReceivable): the key is
// logged with a dead delivery, and slog's JSON lines write C1 characters
// as they are, for a terminal to obey.
func storableKey(k string) bool {
	return hookbox.StorableOrderKey(k) && hookbox.NotReceivable(k, false) == ""
}

func anyGlob(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

func anyEqual(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
