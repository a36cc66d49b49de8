// Command subscriptions keeps a subscription table in step with Stripe,
// although Stripe neither promises order nor stops retrying for days.
//
//	go run ./examples/subscriptions --config examples/subscriptions/hookbox.yaml
//
// Its two handlers:
//
//   - customer.subscription.updated applies only when it is newer than what
//     is stored (effect.ApplyIfNewer on the event's created time), so an old
//     event that arrives late changes nothing. created is in whole seconds:
//     of two updates in one second, the one that arrives first is kept.
//   - invoice.paid moves paid_until to the invoice's period end if that is
//     later, so the invoices may arrive in any order, and counts the invoice
//     once: the invoice id is a business key claimed in the transaction that
//     marks the event done, so a redelivery (even one that arrives after the
//     event row was purged) cannot count it twice.
//
// Both handlers only write to the database, so they are registered with
// Pool.Handle and run inside the transaction that marks the event done.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/worker"
)

func main() {
	configPath := flag.String("config", "examples/subscriptions/hookbox.yaml", "hookbox config")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath); err != nil {
		fmt.Fprintln(os.Stderr, "subscriptions:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath string) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for _, w := range cfg.Warnings { // what hookbox serve would warn of at start
		log.Warn(w)
	}
	svc, err := service.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := Register(ctx, svc); err != nil {
		svc.Close()
		return err
	}
	return svc.ListenAndServe(ctx)
}

// schema: one row per subscription. updated_at is the Stripe event time of
// the last status applied; paid_until is the latest period end of the
// invoices paid, and invoices_paid counts them.
const schema = `CREATE TABLE IF NOT EXISTS subscriptions (
    id            TEXT PRIMARY KEY,
    status        TEXT NOT NULL DEFAULT '',
    updated_at    BIGINT NOT NULL DEFAULT 0,
    paid_until    BIGINT NOT NULL DEFAULT 0,
    invoices_paid BIGINT NOT NULL DEFAULT 0
)`

// stripeEvent is the envelope of every Stripe event.
type stripeEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Created int64           `json:"created"`
	Data    json.RawMessage `json:"data"`
}

// Register creates the table and the handlers for source "stripe". They
// are apply-only (Pool.Handle): they write to the database and call nothing
// else, which is what may run inside the store's transaction.
func Register(ctx context.Context, svc *service.Service) error {
	if err := svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, schema)
		return err
	}); err != nil {
		return fmt.Errorf("create subscriptions table: %w", err)
	}
	svc.Pool.Handle("stripe", "customer.subscription.updated", subscriptionUpdated)
	svc.Pool.Handle("stripe", "invoice.paid", invoicePaid)
	return nil
}

func decode(ev *hookbox.Event, obj any) (stripeEvent, error) {
	var e stripeEvent
	if err := json.Unmarshal(ev.Payload, &e); err != nil {
		return e, worker.Permanent(fmt.Errorf("not a Stripe event: %w", err))
	}
	var data struct {
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil {
		return e, worker.Permanent(fmt.Errorf("event %s: no data.object: %w", e.ID, err))
	}
	if err := json.Unmarshal(data.Object, obj); err != nil {
		return e, worker.Permanent(fmt.Errorf("event %s: %w", e.ID, err))
	}
	return e, nil
}

// subscriptionUpdated applies a status only if it is newer than the stored
// one: Stripe does not deliver in order. The version is the event's
// created, in whole seconds, and a state as old as the stored one is
// refused: of two updates in the same second (a checkout's incomplete,
// then active), the one that arrives first is kept, even when it is the
// earlier. An app that must not lose the later one fetches the
// subscription from Stripe's API when created equals the stored
// updated_at, in the Prepare phase of a two-phase handler
// (Pool.HandlePhases), and applies what it fetched.
func subscriptionUpdated(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
	var sub struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	e, err := decode(ev, &sub)
	if err != nil {
		return err
	}
	_, err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "updated_at",
		map[string]any{"id": sub.ID, "status": sub.Status, "updated_at": e.Created})
	return err
}

// invoicePaid moves paid_until to the invoice's period end unless it is
// already later, whatever order the invoices arrive in, and counts the
// invoice once.
func invoicePaid(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
	var inv struct {
		ID           string `json:"id"`
		Subscription string `json:"subscription"`
		PeriodEnd    int64  `json:"period_end"`
	}
	if _, err := decode(ev, &inv); err != nil {
		return err
	}
	first, err := effect.ClaimKey(ctx, tx, ev, "invoice", inv.ID)
	if err != nil || !first {
		return err // this invoice was already counted
	}
	// The later period end, not paid_until plus the invoice's period: that
	// depended on the order, and a month paid before the one it follows
	// made three periods of two.
	_, err = tx.ExecContext(ctx, `INSERT INTO subscriptions (id, paid_until, invoices_paid) VALUES ($1, $2, 1)
        ON CONFLICT (id) DO UPDATE SET
            paid_until = CASE WHEN subscriptions.paid_until > excluded.paid_until
                THEN subscriptions.paid_until ELSE excluded.paid_until END,
            invoices_paid = subscriptions.invoices_paid + 1`, inv.Subscription, inv.PeriodEnd)
	return err
}
