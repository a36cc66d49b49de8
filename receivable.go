package hookbox

import (
	"net/http"
	"strings"
	"unicode"
)

// NotReceivable says why s, storable text, cannot be taken as a delivery
// id (id set) or an event type at ingest, or "" when it can. Refused are
// control characters (C0, U+0000 to U+001F with tab and line breaks among
// them, DEL, and C1, U+0080 to U+009F), and, in an id, white space at
// either end. The Idempotency-Key header of a forward, and the id hookbox
// signs it with, cannot hold a C0 character or DEL, so an event with one
// could never be forwarded as it is; C1 characters pass in a header but,
// like the others, only ever arrive by mistake or to drive a terminal
// that shows them. White space at the end of an id is trimmed by
// receivers and refused by signing, and an id so written could pass for
// another once encoded (see target.ForwardKey); an event type's is
// harmless, and a verified delivery is not refused for it. Stores still
// take such text (CheckStorable): events stored before this rule keep
// working, see target.Forward.
func NotReceivable(s string, id bool) string {
	for _, r := range s {
		if unicode.IsControl(r) {
			return "holds a control character (a line break, a tab, …)"
		}
	}
	if id && strings.TrimSpace(s) != s {
		return "starts or ends with white space"
	}
	return ""
}

// CheckReceivable is CheckStorable, and then an error matching
// ErrBadDelivery if d's id or event type is not receivable (see
// NotReceivable). It is the rule ingest applies to what a verifier found,
// and a re-check of a refused delivery too, so that the two admit the
// same deliveries.
func CheckReceivable(d *Delivery) error {
	if err := CheckStorable(d); err != nil {
		return err
	}
	if problem, v := NotReceived(d.DeliveryID, d.EventType); problem != "" {
		return BadDelivery(problem+":", v)
	}
	return nil
}

// NotReceived says why a delivery with this id and event type cannot be
// taken at ingest ("delivery id holds a control character …"), with the
// text at fault, or "" when it can (see NotReceivable). Ingest's reply
// and CheckReceivable both say it.
func NotReceived(id, eventType string) (problem, text string) {
	if p := NotReceivable(id, true); p != "" {
		return "delivery id " + p, id
	}
	if p := NotReceivable(eventType, false); p != "" {
		return "event type " + p, eventType
	}
	return "", ""
}

// IdentityEncoded reports whether h declares no content coding but
// identity. Ingest refuses a body that does (415), and a re-check of a
// refused delivery does too: a compressed body would be stored, and
// forwarded, as the sender compressed it, where an id or event type in it
// could not be read and the app, which is not told of the coding
// (forwarding drops the header: an unsigned sender could otherwise hand
// the app a decompression bomb within max_body_bytes), could not read it
// either.
func IdentityEncoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}
