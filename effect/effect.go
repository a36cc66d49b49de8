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
	"context"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// ClaimKey claims key within scope (for example "licence", order id) in the
// handler's transaction. It reports true the first time the key is claimed
// and false ever after, including when an earlier attempt claimed it and
// committed. The claim commits or rolls back with the handler.
func ClaimKey(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, scope, key string) (bool, error) {
	var eventID any
	if ev != nil {
		eventID = ev.ID
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO effect_keys (scope, key, event_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		scope, key, eventID)
	if err != nil {
		return false, fmt.Errorf("claim key %s/%s: %w", scope, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim key %s/%s: %w", scope, key, err)
	}
	return n == 1, nil
}

// IdempotencyKey returns "<source>:<delivery id>", the same on every attempt
// and every redelivery of the event. hookbox's forward target sends it as the
// Idempotency-Key header; a two-phase handler's Prepare passes it to the
// services it calls. It names the event: where the effect is one per
// business object (one licence per order, whatever the events about it), a
// key built from that object's id keeps two events from causing it twice.
func IdempotencyKey(ev *hookbox.Event) string {
	return ev.Source + ":" + ev.DeliveryID
}

// SendSource is the source name under which sends of kind are queued; route
// it to the code that performs them (worker.Pool.Route(effect.SendSource(
// "email"), …)).
func SendSource(kind string) string { return "send:" + kind }

// RecordSend records, in the handler's transaction, that the effect kind
// (for example "email") must be performed once for key (for example the
// order id), with payload as its input. It reports whether this is the first
// record for (kind, key); a second record is ignored, so the effect is
// performed at most once per key however often the handler runs.
//
// The send is a queued event of source SendSource(kind): it is performed
// after the handler's transaction commits, by the Target routed to that
// source, with retries and a dead state like any event.
func RecordSend(ctx context.Context, tx *hookbox.Tx, kind, key string, payload []byte) (bool, error) {
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
		// 00010): one row affected when the send is new.
		q = `WITH d AS (INSERT INTO event_data (source, delivery_id, payload, created_at)
            VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING id)
        INSERT INTO queue (id, source, next_attempt_at, updated_at) SELECT id, $1, $4, $4 FROM d`
		args = []any{SendSource(kind), key, payload, now}
	default:
		return false, fmt.Errorf("record send: unknown dialect %q", tx.Dialect)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("record send %s/%s: %w", kind, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record send %s/%s: %w", kind, key, err)
	}
	return n == 1, nil
}

// Uncertain lists the sends of kind that were started but not confirmed:
// attempted at least once and not done. Each may or may not have reached the
// outside world; the queue will try it again (or has given up, if dead).
func Uncertain(ctx context.Context, s hookbox.Store, kind string) ([]hookbox.Event, error) {
	var out []hookbox.Event
	for _, st := range []hookbox.Status{hookbox.StatusProcessing, hookbox.StatusPending, hookbox.StatusDead} {
		evs, err := s.Events(ctx, hookbox.Filter{Source: SendSource(kind), Status: st, Limit: 10000})
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Attempts > 0 {
				out = append(out, e)
			}
		}
	}
	return out, nil
}
