package effect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestIdempotencyKeysOfStoredEventsDiffer: no two stored events share an
// IdempotencyKey, and no delivery stands for a send. A library caller's
// deliveries of sources "shop:eu" (id "42") and "shop" (id "eu:42") were
// two events with the one key "shop:eu:42", so a service deduplicating by
// it dropped the second's effect; one of source "send" (id "email:ord_7")
// had the key of the send of kind email for ord_7; and one of source
// "send:email" (id "ord_9") took the place of that send: RecordSend then
// reported it recorded before and queued nothing. The stores now refuse
// a source holding ':' or named send (hookbox.CheckStorable).
func TestIdempotencyKeysOfStoredEventsDiffer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		recordSend(t, s, "email", "ord_7")
		for _, d := range []hookbox.Delivery{
			{Source: "shop:eu", DeliveryID: "42"},
			{Source: "shop", DeliveryID: "eu:42"},
			{Source: "send", DeliveryID: "email:ord_7"},
			{Source: effect.SendSource("email"), DeliveryID: "ord_9"},
		} {
			d.Payload, d.ReceivedAt = []byte(`{"from":"outside"}`), time.Now()
			if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil && !errors.Is(err, hookbox.ErrBadDelivery) {
				t.Fatal(err)
			}
		}
		if !recordSend(t, s, "email", "ord_9") {
			t.Error("RecordSend of email for ord_9, never recorded, reported it recorded before: a delivery of source send:email stands for it")
		}
		evs, err := s.Events(ctx, hookbox.Filter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]hookbox.Event{}
		for _, e := range evs {
			k := effect.IdempotencyKey(&e)
			if o, dup := seen[k]; dup {
				t.Errorf("events %d (%q, %q) and %d (%q, %q) share the idempotency key %q",
					o.ID, o.Source, o.DeliveryID, e.ID, e.Source, e.DeliveryID, k)
			}
			seen[k] = e
		}
	})
}

// TestRecordSendNilPayload: a send that needs no input, recorded with a
// nil payload, was stored as NULL, which the stores read as a payload
// that retention cleared: the forward target refused it for good and the
// send went dead without being performed. It is now stored as an empty
// body (found by a helper's review, session 44).
func TestRecordSendNilPayload(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.RecordSend(ctx, tx, "ping", "k1", nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute,
			Sources: []string{effect.SendSource("ping")}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v, %v", evs, err)
		}
		if evs[0].PayloadCleared || evs[0].Payload == nil {
			t.Errorf("a send recorded with a nil payload reads as cleared by retention: cleared=%v payload=%#v", evs[0].PayloadCleared, evs[0].Payload)
		}
	})
}
