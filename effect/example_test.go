package effect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/sqlite"
)

// openStore opens a throwaway SQLite store for an example.
func openStore() (*sqlite.Store, func()) {
	dir, _ := os.MkdirTemp("", "effect-example-")
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "hookbox.db"), sqlite.Options{})
	if err != nil {
		panic(err)
	}
	return s, func() { s.Close(); os.RemoveAll(dir) }
}

// A handler that runs twice for the same order (a crash after the effect, or
// a second event about the same order) issues one licence: the key is
// claimed in the handler's own transaction.
func ExampleClaimKey() {
	s, done := openStore()
	defer done()
	ctx := context.Background()
	issue := func(orderID string) {
		err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			first, err := effect.ClaimKey(ctx, tx, nil, "licence", orderID)
			if err != nil {
				return err
			}
			if first {
				fmt.Println("issue a licence for", orderID)
			} else {
				fmt.Println("licence for", orderID, "already issued")
			}
			return nil
		})
		if err != nil {
			panic(err)
		}
	}
	issue("ord_1")
	issue("ord_1")
	// Output:
	// issue a licence for ord_1
	// licence for ord_1 already issued
}

// The idempotency key is the same on every attempt and every redelivery of
// an event, so a service that deduplicates requests by it applies the call
// once.
func ExampleIdempotencyKey() {
	ev := &hookbox.Event{Source: "stripe", DeliveryID: "evt_1NG8Du2eZvKYlo2C", Attempts: 3}
	fmt.Println(effect.IdempotencyKey(ev))
	// Output: stripe:evt_1NG8Du2eZvKYlo2C
}

// An email has no idempotency support: record it in the handler's
// transaction, and let the queue send it once, afterwards.
func ExampleRecordSend() {
	s, done := openStore()
	defer done()
	ctx := context.Background()
	for attempt := 1; attempt <= 2; attempt++ { // the handler runs twice
		s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			first, err := effect.RecordSend(ctx, tx, "email", "ord_1", []byte(`{"to":"ada@example.com"}`))
			fmt.Printf("attempt %d: recorded=%v\n", attempt, first)
			return err
		})
	}
	// The queued send is an event of source "send:email"; route it to the
	// code that sends, e.g. pool.Route(effect.SendSource("email"), mailer).
	sends, _ := s.Events(ctx, hookbox.Filter{Source: effect.SendSource("email")})
	fmt.Println(len(sends), "send queued for", sends[0].DeliveryID)
	// Nothing attempted yet, so nothing is uncertain.
	uncertain, _ := effect.Uncertain(ctx, s, "email")
	fmt.Println(len(uncertain), "uncertain")
	// Output:
	// attempt 1: recorded=true
	// attempt 2: recorded=false
	// 1 send queued for ord_1
	// 0 uncertain
}
