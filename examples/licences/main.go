// Command licences issues one licence key per paid order and emails it once,
// however often Polar (or any Standard Webhooks sender) delivers order.paid.
//
//	go run ./examples/licences --config examples/licences/hookbox.yaml
//
// The handler has two phases (worker.TwoPhase). Prepare gets the key from
// the licensing service, outside any transaction, with the order id as the
// idempotency key: run twice, it gets the same key back. Apply claims the
// licence by order id in the transaction that marks the event done
// (effect.ClaimKey), so a rerun after a crash finds it and does nothing, and
// records the email there (effect.RecordSend); the queue sends it
// afterwards, once per order.
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
	if err := run(ctx, *configPath, os.Getenv("MAIL_API_URL"), os.Getenv("LICENCE_API_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "licences:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath, mailURL, licenceURL string) error {
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
	if err := Register(ctx, svc, mailURL, licenceURL); err != nil {
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
// on source "polar" issues the licence, with a key from the licensing
// service at licenceURL (minted here when licenceURL is empty), and the
// queued emails go to the mail API at mailURL (printed to stdout when
// mailURL is empty).
func Register(ctx context.Context, svc *service.Service, mailURL, licenceURL string) error {
	if err := svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := tx.ExecContext(ctx, schema)
		return err
	}); err != nil {
		return fmt.Errorf("create licences table: %w", err)
	}
	svc.Pool.HandlePhases("polar", "order.paid", worker.TwoPhase(
		func(ctx context.Context, ev *hookbox.Event) (licence, error) {
			return prepareLicence(ctx, licenceURL, ev)
		},
		issueLicence))
	svc.Pool.Route(effect.SendSource("email"), worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		return sendEmail(ctx, mailURL, ev)
	}))
	return nil
}

// licence is what Prepare hands to Apply.
type licence struct {
	OrderID string
	Email   string
	Key     string
}

// licenceIdempotencyKey names the effect, one licence per order, for the
// licensing service. effect.IdempotencyKey(ev) names the event: two
// different events about one order would get two licences with it.
func licenceIdempotencyKey(orderID string) string { return "licence:" + orderID }

// prepareLicence gets the order's licence key. It runs outside any
// transaction, so it may wait on the licensing service; it runs again after
// a failed attempt or a crash, and for every event about the order, and the
// idempotency key makes the service answer each repeat with the same
// licence instead of minting another.
func prepareLicence(ctx context.Context, licenceURL string, ev *hookbox.Event) (licence, error) {
	var o orderPaid
	if err := json.Unmarshal(ev.Payload, &o); err != nil || o.Data.ID == "" {
		return licence{}, worker.Permanent(fmt.Errorf("order.paid without an order id"))
	}
	l := licence{OrderID: o.Data.ID, Email: o.Data.Customer.Email}
	if licenceURL == "" {
		// No licensing service: mint the key here. A repeat mints another,
		// but only the key of the first Apply to claim the order is kept.
		var raw [16]byte
		rand.Read(raw[:])
		l.Key = hex.EncodeToString(raw[:])
		return l, nil
	}
	reqBody, _ := json.Marshal(map[string]string{"order_id": l.OrderID, "email": l.Email})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, licenceURL, bytes.NewReader(reqBody))
	if err != nil {
		return l, worker.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", licenceIdempotencyKey(l.OrderID))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return l, fmt.Errorf("licensing service answered %s", resp.Status)
	}
	var issued struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&issued); err != nil || issued.Key == "" {
		return l, fmt.Errorf("licensing service: no key in the reply (%v)", err)
	}
	l.Key = issued.Key
	return l, nil
}

// issueLicence is the Apply phase: it runs in the transaction that marks
// the event done, and only writes to the database.
func issueLicence(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, l licence) error {
	first, err := effect.ClaimKey(ctx, tx, ev, "licence", l.OrderID)
	if err != nil || !first {
		return err // already issued for this order: nothing to do
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO licences (order_id, licence_key, email) VALUES ($1, $2, $3)`,
		l.OrderID, l.Key, l.Email); err != nil {
		return err
	}
	msg, _ := json.Marshal(email{
		To:      l.Email,
		Subject: "Your licence key",
		Body:    "Thank you for your order " + l.OrderID + ". Your key: " + l.Key,
	})
	_, err = effect.RecordSend(ctx, tx, "email", l.OrderID, msg)
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
