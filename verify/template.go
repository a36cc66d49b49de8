package verify

import (
	"errors"
	"strconv"
	"strings"
)

// The hmac scheme's Signed key says what the signature covers, as a
// template: literal text and the placeholders {timestamp} (the value of
// TimestampHeader) and {url} (PublicURL), ending in {body} (the raw body).
// "v0:{timestamp}:{body}" is Slack's and Zoom's, "{url}{body}" Square's,
// "{timestamp}{body}" Discord's and SendGrid's; the default is "{body}".

// maxTemplateLen bounds the Signed template.
const maxTemplateLen = 256

// templatePart is one piece of what precedes the body: literal text, or a
// placeholder.
type templatePart struct {
	kind partKind
	text string // the literal text, for partLiteral
}

type partKind uint8

const (
	partLiteral partKind = iota
	partTimestamp
	partURL
)

// parseSignedTemplate parses a Signed template into the parts before
// {body}; "" means "{body}". {body} must come once, at the end; any other
// "{" or "}" is an error, so a mistyped placeholder is caught at start.
func parseSignedTemplate(t string) ([]templatePart, error) {
	if t == "" {
		return nil, nil
	}
	if len(t) > maxTemplateLen {
		return nil, errors.New("signed: longer than " + strconv.Itoa(maxTemplateLen) + " bytes")
	}
	rest, ok := strings.CutSuffix(t, "{body}")
	if !ok {
		return nil, errors.New("signed: must end with {body}")
	}
	var parts []templatePart
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			parts = append(parts, templatePart{kind: partLiteral, text: rest})
			break
		}
		if open > 0 {
			parts = append(parts, templatePart{kind: partLiteral, text: rest[:open]})
			rest = rest[open:]
		}
		switch {
		case strings.HasPrefix(rest, "{timestamp}"):
			parts = append(parts, templatePart{kind: partTimestamp})
			rest = rest[len("{timestamp}"):]
		case strings.HasPrefix(rest, "{url}"):
			parts = append(parts, templatePart{kind: partURL})
			rest = rest[len("{url}"):]
		case strings.HasPrefix(rest, "{body}"):
			return nil, errors.New("signed: {body} must come once, at the end")
		default:
			return nil, errors.New("signed: unknown placeholder; use {timestamp}, {url} and {body}")
		}
	}
	return parts, nil
}

// templateUses reports which placeholders the parts use.
func templateUses(parts []templatePart) (timestamp, url bool) {
	for _, p := range parts {
		switch p.kind {
		case partTimestamp:
			timestamp = true
		case partURL:
			url = true
		}
	}
	return timestamp, url
}

// appendTemplate appends the bytes the parts stand for to buf.
func appendTemplate(buf []byte, parts []templatePart, ts int64, url string) []byte {
	for _, p := range parts {
		switch p.kind {
		case partLiteral:
			buf = append(buf, p.text...)
		case partTimestamp:
			buf = strconv.AppendInt(buf, ts, 10)
		case partURL:
			buf = append(buf, url...)
		}
	}
	return buf
}
