// Command licences issues one licence key per paid order and emails it once,
// however often Polar (or any Standard Webhooks sender) delivers order.paid.
//
//	go run ./examples/licences --config examples/licences/hookbox.yaml
//
// The licence is claimed by order id in the same transaction that marks the
// event done (effect.ClaimKey), so a rerun after a crash finds it and does
// nothing. The email is recorded in that transaction (effect.RecordSend) and
// sent afterwards by the queue, once per order.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	configPath := flag.String("config", "examples/licences/hookbox.yaml", "hookbox config")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath, os.Getenv("MAIL_API_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "licences:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath, mailURL string) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	svc, err := service.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := Register(ctx, svc, mailURL); err != nil {
		svc.Close()
		return err
	}
	return svc.ListenAndServe(ctx)
}

// schema is the application's own table, in the service's database.
const schema = `CREATE TABLE IF NOT EXISTS licences (
    order_id    TEXT PRIMARY KEY,
    licence_key TEXT NOT NULL,
    email       TEXT NOT NULL
)`

// orderPaid is the part of Polar's order.paid payload this app reads.
type orderPaid struct {
	Data struct {
		ID       string `json:"id"`
		Customer struct {
			Email string `json:"email"`
		} `json:"customer"`
	} `json:"data"`
}

// email is what the mail API receives.
type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Register creates the licences table and wires the handlers: order.paid
// on source "polar" issues the licence, and the queued emails go to the
// mail API at mailURL (printed to stdout when mailURL is empty).
func Register(ctx context.Context, svc *service.Service, mailURL string) error {
	if err := svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, schema)
		return err
	}); err != nil {
		return fmt.Errorf("create licences table: %w", err)
	}
	svc.Pool.Handle("polar", "order.paid", issueLicence)
	svc.Pool.Route(effect.SendSource("email"), worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		return sendEmail(ctx, mailURL, ev)
	}))
	return nil
}

// issueLicence runs in the transaction that marks the event done.
func issueLicence(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
	var o orderPaid
	if err := json.Unmarshal(ev.Payload, &o); err != nil || o.Data.ID == "" {
		return worker.Permanent(fmt.Errorf("order.paid without an order id"))
	}
	first, err := effect.ClaimKey(ctx, tx, ev, "licence", o.Data.ID)
	if err != nil || !first {
		return err // already issued for this order: nothing to do
	}
	// Mint the key only now that the order is known to be new.
	var raw [16]byte
	rand.Read(raw[:])
	key := hex.EncodeToString(raw[:])
	if _, err := tx.ExecContext(ctx, `INSERT INTO licences (order_id, licence_key, email) VALUES ($1, $2, $3)`,
		o.Data.ID, key, o.Data.Customer.Email); err != nil {
		return err
	}
	msg, _ := json.Marshal(email{
		To:      o.Data.Customer.Email,
		Subject: "Your licence key",
		Body:    "Thank you for your order " + o.Data.ID + ". Your key: " + key,
	})
	_, err = effect.RecordSend(ctx, tx, "email", o.Data.ID, msg)
	return err
}

// sendEmail posts one queued email to the mail API, with the order id as the
// idempotency key for APIs that honour one.
func sendEmail(ctx context.Context, mailURL string, ev *hookbox.Event) error {
	if mailURL == "" {
		fmt.Printf("email for order %s: %s\n", ev.DeliveryID, ev.Payload)
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mailURL, bytes.NewReader(ev.Payload))
	if err != nil {
		return worker.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", effect.IdempotencyKey(ev))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("mail API answered %s", resp.Status)
	}
	return nil
}
