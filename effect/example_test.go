package effect_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/worker"
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
// claimed in the transaction that marks the event done (here a bare one).
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

// A handler that calls another service does it in the Prepare phase of a
// two-phase handler, outside any transaction, with the event's idempotency
// key. Here the service's first reply is lost, so Prepare fails and runs
// again: the service, deduplicating by the key, charges once.
func ExampleIdempotencyKey_twoPhase() {
	s, done := openStore()
	defer done()
	ctx := context.Background()

	// A payment service that deduplicates by Idempotency-Key, and loses
	// its first reply.
	var mu sync.Mutex
	calls, charges := 0, map[string]bool{}
	charge := func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		charges[key] = true
		if calls == 1 {
			return errors.New("reply lost")
		}
		return nil
	}

	pool := worker.New(s, worker.Options{})
	pool.SetPolicy("shop", worker.Policy{BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	finished := make(chan struct{})
	pool.HandlePhases("shop", "", worker.TwoPhase(
		func(ctx context.Context, ev *hookbox.Event) (string, error) { // outside any transaction
			key := effect.IdempotencyKey(ev)
			return key, charge(key)
		},
		func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, key string) error { // in the transaction
			first, err := effect.ClaimKey(ctx, tx, ev, "charge", key)
			if err == nil && first {
				close(finished)
			}
			return err
		}))
	if _, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "shop", DeliveryID: "ord_7", Payload: []byte(`{}`), ReceivedAt: time.Now()}}); err != nil {
		panic(err)
	}
	if err := pool.Start(ctx); err != nil {
		panic(err)
	}
	pool.Notify()
	<-finished
	pool.Stop(ctx)
	fmt.Printf("service called %d times, %d charge: %v\n", calls, len(charges), charges)
	// Output: service called 2 times, 1 charge: map[shop:ord_7:true]
}
