// Package effect makes a handler's side effects safe to repeat.
//
// A handler can run twice for one event: a crash after the effect and before
// the event is marked done makes the next worker run it again. Deduplication
// at the door cannot prevent that; these three techniques, strongest first,
// make the repeat harmless:
//
//   - ClaimKey: a business key (an order id, a commit SHA) claimed in the
//     transaction that marks the event done (an apply-only handler, or the
//     Apply phase of a two-phase one), so "effect applied" and "event done"
//     commit together. A rerun finds the key and does nothing.
//   - IdempotencyKey: a key derived from the event, stable across attempts,
//     to pass to another service that deduplicates requests (Stripe's
//     Idempotency-Key header, for example). Such calls belong in the Prepare
//     phase of a two-phase handler (worker.Pool.HandlePhases), which runs
//     outside any transaction and may run more than once.
//   - RecordSend: for effects with no idempotency support (an email), the
//     send is recorded in the transaction that marks the event done and
//     performed afterwards by the queue, under its own lease, retries and
//     dead state. A crash between sending and marking it sent leaves it
//     visible as unfinished (Uncertain lists them), and the rerun repeats it
//     at most once.
//
// ClaimKey and RecordSend only write to the database, so they may run inside
// the store's transaction; nothing that waits on another service may.
package effect

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
)

// ClaimKey claims key within scope (for example "licence", order id) in the
// handler's transaction. It reports true the first time the key is claimed
// and false ever after, including when an earlier attempt claimed it and
// committed. The claim commits or rolls back with the handler. Claimed keys
// are never purged.
//
// Scopes starting with "send:" hold RecordSend's keys; ClaimKey refuses
// them, so a handler's key and a send cannot stand in for each other. A
// scope may hold up to MaxScope bytes, a key any number of any bytes: on
// PostgreSQL, whose index rows hold about 2.7 KB and whose text holds
// neither NUL nor bytes that are not UTF-8, a key that does not fit
// 2,048 bytes with its scope, or holds such bytes, is kept as its start
// and its SHA-256 (see storedKey).
func ClaimKey(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, scope, key string) (bool, error) {
	if strings.HasPrefix(scope, sendPrefix) {
		return false, fmt.Errorf("claim key %s/%s: scopes starting with %q are RecordSend's", scope, keyText(key), sendPrefix)
	}
	return claim(ctx, tx, ev, scope, key)
}

// MaxScope is the longest scope, in bytes, ClaimKey accepts (and the
// longest "send:"+kind RecordSend does). Keys have no limit.
const MaxScope = 1024

// pgKeyRoom is how many bytes of scope and key together PostgreSQL keeps
// as they are. Its btree holds at most about 2,700 bytes per index row
// after compression, so a longer key that does not compress could never
// be stored; one past this room is kept shortened (see storedKey).
const pgKeyRoom = 2048

// storedKey returns the text under which key is kept in scope, and
// whether it was shortened. On SQLite, and on PostgreSQL when scope and
// key fit pgKeyRoom, that is key itself. Past the room it is the start of
// key, cut at a character boundary, then "~sha256:" and the hex SHA-256
// of the whole key: scope and shortened key always exceed the room, so
// no key kept as it is can equal a shortened one, and the hash tells
// long keys apart.
//
// PostgreSQL's text cannot hold a NUL byte or bytes that are not UTF-8
// (a key built from a payload's "\u0000"): such a key, of any length, is
// kept as its text part, those bytes replaced, then the tag and the hash
// of the whole key. A key kept as it is could equal it only by holding
// that tag and the SHA-256 of another key, written on purpose.
func storedKey(d hookbox.Dialect, scope, key string) (string, bool) {
	if d != hookbox.DialectPostgres {
		return key, false
	}
	text := hookbox.StorableText(key)
	if text && len(scope)+len(key) <= pgKeyRoom {
		return key, false
	}
	sum := sha256.Sum256([]byte(key))
	start := key
	if !text {
		start = strings.ReplaceAll(strings.ToValidUTF8(key, "?"), "\x00", "?")
	}
	const tag = len("~sha256:") + 2*sha256.Size
	if n := pgKeyRoom - len(scope) - tag + 4; n < len(start) { // a cut loses at most 3 bytes
		for n > 0 && !utf8.RuneStart(start[n]) {
			n--
		}
		start = start[:n]
	}
	return start + "~sha256:" + hex.EncodeToString(sum[:]), true
}

// keyText is key as errors show it: quoted when it is not text.
func keyText(key string) string {
	if hookbox.StorableText(key) {
		return key
	}
	return strconv.Quote(key)
}

// exists reports whether query, which selects at most one row, finds one.
func exists(ctx context.Context, tx *hookbox.Tx, query string, args ...any) (bool, error) {
	var one int
	err := tx.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// claim inserts (scope, key) into effect_keys, noting ev's id, and reports
// whether it was new. The key is kept as storedKey says.
func claim(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, scope, key string) (bool, error) {
	if len(scope) > MaxScope {
		return false, fmt.Errorf("claim key: scope of %d bytes; at most %d", len(scope), MaxScope)
	}
	var eventID any
	if ev != nil {
		eventID = ev.ID
	}
	stored, short := storedKey(tx.Dialect, scope, key)
	if short && hookbox.StorableText(key) {
		// A long key that compressed below the btree's limit was kept
		// as it is before long keys were shortened.
		if found, err := exists(ctx, tx, `SELECT 1 FROM effect_keys WHERE scope = $1 AND key = $2`, scope, key); err != nil || found {
			if err != nil {
				err = fmt.Errorf("claim key %s/%s: %w", scope, stored, err)
			}
			return false, err
		}
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO effect_keys (scope, key, event_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		scope, stored, eventID)
	if err != nil {
		return false, fmt.Errorf("claim key %s/%s: %w", scope, keyText(key), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim key %s/%s: %w", scope, keyText(key), err)
	}
	return n == 1, nil
}

// IdempotencyKey returns "<source>:<delivery id>", the same on every attempt
// and every redelivery of the event. hookbox's forward target sends it as the
// Idempotency-Key header; a two-phase handler's Prepare passes it to the
// services it calls. It names the event: where the effect is one per
// business object (one licence per order, whatever the events about it), a
// key built from that object's id keeps two events from causing it twice.
// No two events share it: no stored source holds a ':', and a source is
// named "send" or starts with "send:" only for sends (hookbox.CheckStorable).
func IdempotencyKey(ev *hookbox.Event) string {
	return ev.Source + ":" + ev.DeliveryID
}

// sendPrefix starts the source name of every send.
const sendPrefix = "send:"

// SendSource is the source name under which sends of kind are queued; route
// it to the code that performs them (worker.Pool.Route(effect.SendSource(
// "email"), …)). SendSource("") is the prefix every send's source starts
// with.
//
// It panics if kind holds ':' or '/' (see RecordSend): such a kind is a
// programming error, found where the sends are routed.
func SendSource(kind string) string {
	if err := checkKind(kind); err != nil {
		panic("effect: " + err.Error())
	}
	return sendPrefix + kind
}

// checkKind refuses the kinds whose sends could be mistaken for another
// kind's: with ':' the IdempotencyKey of kind "a", key "b:c" would equal
// that of kind "a:b", key "c"; with '/' the source "send:a/b" reads as a
// target delivery of source "send:a", which the store's source filter
// includes in listings of "send:a".
func checkKind(kind string) error {
	if strings.ContainsAny(kind, ":/") {
		return fmt.Errorf("send kind %q holds ':' or '/'", kind)
	}
	return nil
}

// RecordSend records, in the handler's transaction, that the effect kind
// (for example "email") must be performed once for key (for example the
// order id), with payload as its input. It reports whether this is the first
// record for (kind, key); a second record is ignored, so the effect is
// performed at most once per key however often the handler runs, and
// however long after: the key is claimed in the handler's transaction like
// ClaimKey's, under the scope SendSource(kind), and outlives the send's
// event when retention purges it. (A send recorded by an earlier hookbox,
// which claimed no key, got its key from the stores' migration, or, if
// recorded after the migration ran, gets it when retention purges it.)
//
// The send is a queued event of source SendSource(kind), whose delivery
// id is key: it is performed after the handler's transaction commits, by
// the Target routed to that source, with retries and a dead state like
// any event. On PostgreSQL a key too long for its index, or one with a
// NUL byte or bytes that are not UTF-8, is kept as ClaimKey keeps it (its
// text part and its SHA-256; see storedKey), and that is the send's
// delivery id there: a Target that needs the key itself should find it in
// payload.
//
// kind must not be empty or hold ':' or '/'; RecordSend refuses such a kind
// with an error and records nothing.
func RecordSend(ctx context.Context, tx *hookbox.Tx, kind, key string, payload []byte) (bool, error) {
	if kind == "" {
		return false, fmt.Errorf("record send: empty send kind")
	}
	if err := checkKind(kind); err != nil {
		return false, fmt.Errorf("record send: %w", err)
	}
	if payload == nil {
		// A send that needs no input: stored as NULL, its payload read
		// as one retention cleared, and the send was never performed.
		payload = []byte{}
	}
	// The key is claimed first, in effect_keys, which retention never
	// purges: the queue row alone was forgotten once purged, and the send
	// was then recorded and performed again. A send recorded before keys
	// were claimed has no key yet; its queue row, while it exists, keeps
	// the insert below from recording it twice, and the key claimed here
	// remembers it from then on.
	first, err := claim(ctx, tx, nil, sendPrefix+kind, key)
	if err != nil {
		return false, fmt.Errorf("record send %s/%s: %w", kind, keyText(key), err)
	}
	if !first {
		return false, nil
	}
	// The send's delivery id is its key, shortened as in effect_keys: the
	// events' (source, delivery_id) index has the same limit. A send an
	// older hookbox recorded without a key kept a long key as it is, when
	// it compressed below the limit: its row, not the shortened id, says
	// it is recorded.
	raw := key
	key, short := storedKey(tx.Dialect, sendPrefix+kind, key)
	if short && hookbox.StorableText(raw) {
		if found, err := exists(ctx, tx, `SELECT 1 FROM events WHERE source = $1 AND delivery_id = $2`, SendSource(kind), raw); err != nil || found {
			if err != nil {
				err = fmt.Errorf("record send %s/%s: %w", kind, keyText(key), err)
			}
			return false, err
		}
	}
	now := time.Now()
	var q string
	var args []any
	switch tx.Dialect {
	case hookbox.DialectSQLite:
		ms := now.UnixMilli()
		q = `INSERT INTO events (source, delivery_id, payload, next_attempt_at, created_at, updated_at)
            VALUES ($1, $2, $3, $4, $4, $4) ON CONFLICT DO NOTHING`
		args = []any{SendSource(kind), key, payload, ms}
	case hookbox.DialectPostgres:
		// The event's data, then its queue row (the store's migration
		// 00010): one row affected when the send is new. It is due at
		// the database's now(), the clock claims judge by: this host's
		// clock may be ahead of it, by minutes, which the send would
		// wait.
		q = `WITH d AS (INSERT INTO event_data (source, delivery_id, payload, created_at)
            VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING id)
        INSERT INTO queue (id, source, next_attempt_at, updated_at) SELECT id, $1, now(), $4 FROM d`
		args = []any{SendSource(kind), key, payload, now}
	default:
		return false, fmt.Errorf("record send: unknown dialect %q", tx.Dialect)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("record send %s/%s: %w", kind, keyText(key), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record send %s/%s: %w", kind, keyText(key), err)
	}
	return n == 1, nil
}

// uncertainPage is how many events Uncertain reads per query.
const uncertainPage = 1000

// Uncertain lists the sends of kind that were started but not confirmed:
// attempted at least once and not done. Each may or may not have reached the
// outside world; the queue will try it again (or has given up, if dead).
//
// It lists every such send, however many others the kind has: it pages
// through the kind's pending, then processing, then dead sends (the store
// cannot select attempted ones, so unattempted ones are read and skipped).
// Only sends of exactly this kind are listed, not those of a kind that
// starts with kind and '/'. Each send appears once, newest first.
//
// The passes are separate queries, so a send that changes state during the
// call is seen as it was when its pass read it. The order follows a send's
// way forward: one claimed after the pending pass is found by the
// processing pass, one given up on after the processing pass by the dead
// pass. What remains: a send put back from processing to pending (a failed
// attempt to retry) after the pending pass and before the processing pass
// reads it, or a dead send replayed after the pending pass and before the
// dead pass reads it, is missed by this call; the next call lists it.
func Uncertain(ctx context.Context, s hookbox.Store, kind string) ([]hookbox.Event, error) {
	out, _, err := uncertain(ctx, s, kind, 0)
	return out, err
}

// UncertainUpTo is Uncertain for a listing that must stay bounded however
// many sends are uncertain (a page of the console): it returns the newest
// max of them (max above 0), as Uncertain would list them, and whether
// there are more. Each pass stops once it holds max sends of its status,
// so the call holds at most three times max events; the newest max of all
// are among them. (The pending pass still reads, a page at a time, past
// the unattempted sends newer than its max-th attempted one.)
func UncertainUpTo(ctx context.Context, s hookbox.Store, kind string, max int) (evs []hookbox.Event, more bool, err error) {
	if max <= 0 {
		return nil, false, fmt.Errorf("uncertain sends: want a bound above 0, not %d", max)
	}
	return uncertain(ctx, s, kind, max)
}

// uncertain is Uncertain (max 0) and UncertainUpTo (max above 0).
func uncertain(ctx context.Context, s hookbox.Store, kind string, max int) ([]hookbox.Event, bool, error) {
	// Not SendSource: a kind refused today may name sends recorded before
	// the check, and listing them must not panic.
	source := sendPrefix + kind
	var out []hookbox.Event
	more := false
	at := map[int64]int{} // id → index in out
	for _, st := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDead} {
		f := hookbox.Filter{Source: source, Status: st, Limit: uncertainPage}
		held := 0 // sends of this pass
	pass:
		for {
			evs, err := s.Events(ctx, f)
			if err != nil {
				return nil, false, err
			}
			for _, e := range evs {
				if e.Attempts == 0 || e.Source != source {
					continue
				}
				if max > 0 && held == max {
					// The newest max of this status are held: older
					// ones cannot be among the newest max of all.
					more = true
					break pass
				}
				held++
				if j, ok := at[e.ID]; ok {
					out[j] = e // seen by an earlier pass: keep the later state
					continue
				}
				at[e.ID] = len(out)
				out = append(out, e)
			}
			if len(evs) < uncertainPage {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID // newest first: the next page is below
		}
	}
	slices.SortFunc(out, func(a, b hookbox.Event) int { return cmp.Compare(b.ID, a.ID) })
	if max > 0 && len(out) > max {
		out, more = out[:max], true
	}
	return out, more, nil
}
