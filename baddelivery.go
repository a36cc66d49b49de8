package hookbox

import (
	"context"
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

// CheckStorable returns an error matching ErrBadDelivery if d's id or event
// type is longer than MaxIDLength or not StorableText, or if the order key
// of one of its Routes is not StorableOrderKey. It is the rule the
// receiver applies to what a verifier found, and a re-check of a refused
// delivery too; stores call it for every delivery before they write, and
// add their own rules. Routing never gives a key it refuses; a library
// caller that sets Route.OrderKey itself is held to it here.
func CheckStorable(d *Delivery) error {
	for _, f := range [...]struct{ name, v string }{{"delivery id", d.DeliveryID}, {"event type", d.EventType}} {
		if len(f.v) > MaxIDLength {
			return BadDelivery(fmt.Sprintf("%s longer than %d bytes:", f.name, MaxIDLength), f.v)
		}
		if !StorableText(f.v) {
			return BadDelivery(f.name+" is not UTF-8 text without NUL bytes:", f.v)
		}
	}
	for _, r := range d.Routes {
		if !StorableOrderKey(r.OrderKey) {
			return BadDelivery(fmt.Sprintf("order key of target %s longer than %d bytes, or not UTF-8 text without NUL bytes:",
				ShortQuote(r.Target), MaxOrderKeyLength), r.OrderKey)
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
