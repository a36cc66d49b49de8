package hookbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// ErrBadDelivery means a delivery cannot be stored as it was sent: an id
// or event type too long, text that is not UTF-8, a value the database
// refuses. It is the sender's fault, not the store's, and sending it again
// cannot help: the receiver answers 400, not 503.
var ErrBadDelivery = errors.New("bad delivery")

// BadDeliveries is the error Store.Ingest and IngestTx.Add return when
// some deliveries of a batch cannot be stored and the others were: the
// receipts returned with it hold for every index not in Bad (after Commit,
// for IngestTx.Add), and the transaction stays usable. Each error in Bad
// matches ErrBadDelivery. A caller that does not know this type and treats
// it as a failure of the whole batch is merely conservative.
type BadDeliveries struct {
	Bad map[int]error // index in the batch → why it cannot be stored
}

// Error names how many deliveries were refused and the first reason.
func (e *BadDeliveries) Error() string {
	idx := make([]int, 0, len(e.Bad))
	for i := range e.Bad {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) == 0 {
		return "no bad deliveries"
	}
	return fmt.Sprintf("%d deliveries cannot be stored; delivery %d: %v", len(idx), idx[0], e.Bad[idx[0]])
}

// Is reports that a BadDeliveries matches ErrBadDelivery.
func (e *BadDeliveries) Is(target error) bool { return target == ErrBadDelivery }

// ItemError returns the error of the i-th delivery, or nil if it was
// stored.
func (e *BadDeliveries) ItemError(i int) error { return e.Bad[i] }

// BadDelivery returns an error matching ErrBadDelivery that says why, with
// value (an id or event type, possibly kilobytes long or not UTF-8) cut
// short and quoted, so that logs stay readable.
func BadDelivery(why, value string) error {
	return fmt.Errorf("%w: %s %s", ErrBadDelivery, why, ShortQuote(value))
}

// ShortQuote quotes s for a log or an error, cut to its first 64 bytes.
func ShortQuote(s string) string {
	const keep = 64
	if len(s) <= keep {
		return fmt.Sprintf("%q", s)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// CheckStorable returns an error matching ErrBadDelivery if a store
// cannot keep d as it is. It is the one rule both stores apply to every
// delivery before any SQL, so that a delivery is refused alone
// (*BadDeliveries) by every store or stored by every store; the receiver
// applies it to what a verifier found, and a re-check of a refused
// delivery too. It refuses:
//
//   - a source name that is empty, holds a '/', or is longer than
//     MaxNameLength or not StorableText: the rows of a source's
//     deliveries to its targets are kept under QueueName(source, target),
//     "source/target", so a source named "shop/app" would share its
//     delivery ids' dedupe with, and be claimed and worked by, the
//     target app of the source shop;
//   - a source holding a ':' or named "send": a program's sends are
//     queued under "send:KIND" (effect.RecordSend), and an event's
//     idempotency key is "source:delivery id" (effect.IdempotencyKey),
//     so a delivery of source "send:email", or of "send" with id
//     "email:ord_7", would take the place of a send, and one of
//     "shop:eu" with id "42" share the key of one of "shop" with id
//     "eu:42";
//   - a delivery id or event type longer than MaxIDLength or not
//     StorableText;
//   - a header name or value holding a NUL byte (PostgreSQL's jsonb
//     cannot hold one; bytes that are not UTF-8 are kept, see
//     EncodeHeader);
//   - a BodySHA256 that is set but not a SHA-256 (32 bytes): an empty
//     one would make every delivery of the source a duplicate of the
//     first, a long one passed SQLite and not PostgreSQL's index;
//   - a ReceivedAt outside the years 0 to 9999, which RFC 3339, and so
//     the events' JSON, cannot write (PostgreSQL refused some of them);
//   - a Route with an empty target, a target named twice (the
//     deliveries' rows would share a key and fail the whole batch), a
//     target longer than MaxNameLength or not StorableText, or an order
//     key that is not StorableOrderKey.
//
// Routing never gives a route or a key it refuses, and the receiver never
// gives a source, header or time it refuses; a library caller that sets
// them itself is held to it here.
func CheckStorable(d *Delivery) error {
	if d.Source == "" {
		return BadDelivery("a delivery has no source:", d.DeliveryID)
	}
	if strings.IndexByte(d.Source, '/') >= 0 {
		return BadDelivery("source holds a '/', which names a target's queue (source/target):", d.Source)
	}
	if strings.IndexByte(d.Source, ':') >= 0 || d.Source == "send" {
		return BadDelivery("source holds a ':' or is send, as the sends a program records are (send:KIND), which its events' idempotency keys (source:delivery id) would be mistaken for:", d.Source)
	}
	if len(d.Source) > MaxNameLength {
		return BadDelivery(fmt.Sprintf("source longer than %d bytes:", MaxNameLength), d.Source)
	}
	if !StorableText(d.Source) {
		return BadDelivery("source is not UTF-8 text without NUL bytes:", d.Source)
	}
	for _, f := range [...]struct{ name, v string }{{"delivery id", d.DeliveryID}, {"event type", d.EventType}} {
		if len(f.v) > MaxIDLength {
			return BadDelivery(fmt.Sprintf("%s longer than %d bytes:", f.name, MaxIDLength), f.v)
		}
		if !StorableText(f.v) {
			return BadDelivery(f.name+" is not UTF-8 text without NUL bytes:", f.v)
		}
	}
	for name, vs := range d.Header {
		if strings.IndexByte(name, 0) >= 0 {
			return BadDelivery("a header name holds a NUL byte:", name)
		}
		for _, v := range vs {
			if strings.IndexByte(v, 0) >= 0 {
				return BadDelivery("a header value holds a NUL byte: header", name)
			}
		}
	}
	if d.BodySHA256 != nil && len(d.BodySHA256) != sha256.Size {
		return BadDelivery(fmt.Sprintf("body SHA-256 is %d bytes, not %d, for delivery", len(d.BodySHA256), sha256.Size), d.DeliveryID)
	}
	if y := d.ReceivedAt.UTC().Year(); y < 0 || y > 9999 {
		return BadDelivery(fmt.Sprintf("received in the year %d, outside 0 to 9999: delivery", y), d.DeliveryID)
	}
	for i, r := range d.Routes {
		switch {
		case r.Target == "":
			return BadDelivery("a route has no target: delivery", d.DeliveryID)
		case len(r.Target) > MaxNameLength:
			return BadDelivery(fmt.Sprintf("target longer than %d bytes:", MaxNameLength), r.Target)
		case !StorableText(r.Target):
			return BadDelivery("target is not UTF-8 text without NUL bytes:", r.Target)
		case !StorableOrderKey(r.OrderKey):
			return BadDelivery(fmt.Sprintf("order key of target %s longer than %d bytes, or not UTF-8 text without NUL bytes:",
				ShortQuote(r.Target), MaxOrderKeyLength), r.OrderKey)
		}
		for _, earlier := range d.Routes[:i] {
			if earlier.Target == r.Target {
				return BadDelivery("two routes to one target:", r.Target)
			}
		}
	}
	return nil
}

// StorableOrderKey reports whether k can be stored as an order key
// (Route.OrderKey): StorableText of at most MaxOrderKeyLength bytes.
func StorableOrderKey(k string) bool {
	return len(k) <= MaxOrderKeyLength && StorableText(k)
}

// StorableText reports whether s can be stored as text in every store:
// valid UTF-8 without NUL bytes (PostgreSQL's text refuses both).
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// IngestInOne stores ds through one ingest transaction of b (begin, add,
// commit) and returns once it is durable: how a store that keeps
// transactions open implements Store.Ingest. Deliveries refused alone
// (*BadDeliveries) are left out and the others committed.
func IngestInOne(ctx context.Context, b IngestBeginner, ds []Delivery) ([]Receipt, error) {
	if len(ds) == 0 {
		return []Receipt{}, nil
	}
	tx, err := b.BeginIngest(ctx)
	if err != nil {
		return nil, err
	}
	rs, addErr := tx.Add(ctx, ds)
	var bad *BadDeliveries
	if addErr != nil && !errors.As(addErr, &bad) {
		tx.Rollback()
		return nil, addErr
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return rs, addErr
}
