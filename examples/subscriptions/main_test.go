package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/service"
)

const testSecret = "whsec_subscriptions_test_secret"

const testConfig = `
sources:
  - name: stripe
    scheme: stripe
    secrets: ["` + testSecret + `"]
`

// stripeSend signs body with stripe-go's test signer and posts it.
func stripeSend(t *testing.T, srv *e2e.Server, body string) e2e.Reply {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: []byte(body), Secret: testSecret, Timestamp: time.Now(),
	})
	h := http.Header{}
	h.Set("Stripe-Signature", signed.Header)
	return srv.Post("stripe", h, signed.Payload)
}

func subUpdated(evtID string, created int64, status string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","type":"customer.subscription.updated","created":%d,
"data":{"object":{"id":"sub_1","object":"subscription","status":%q}}}`, evtID, created, status)
}

func invoicePaidBody(evtID, invoice string, start, end int64) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","created":%d,
"data":{"object":{"id":%q,"object":"invoice","subscription":"sub_1","period_start":%d,"period_end":%d}}}`,
		evtID, start, invoice, start, end)
}

func TestOutOfOrderAndRedelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc)
		})
		monday := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).Unix()
		month := int64(30 * 24 * 3600)

		// Newer state first, older second: the older must not win.
		for _, body := range []string{
			subUpdated("evt_2", monday+60, "past_due"),
			subUpdated("evt_1", monday, "active"),
		} {
			if r := stripeSend(t, srv, body); r.Status != http.StatusAccepted || r.Duplicate {
				t.Fatalf("delivery: %+v", r)
			}
		}
		// Monday's invoice.paid.
		invoice := invoicePaidBody("evt_inv_mon", "in_1", monday, monday+month)
		stripeSend(t, srv, invoice)
		srv.WaitIdle(20 * time.Second)

		// Wednesday: Stripe redelivers Monday's event. Deduplicated at the door.
		if r := stripeSend(t, srv, invoice); !r.Duplicate {
			t.Errorf("redelivery of evt_inv_mon not recognised: %+v", r)
		}
		// Retention purged the event row meanwhile; a further redelivery is
		// stored again, and the invoice key keeps it from extending twice.
		// A newer event comes first, as it would in a week: a purge keeps
		// the newest event (on SQLite, so that its id is never handed out
		// again). It is older than evt_2's state, so it changes nothing.
		stripeSend(t, srv, subUpdated("evt_3", monday+30, "active"))
		srv.WaitIdle(20 * time.Second)
		purge(t, srv)
		if r := stripeSend(t, srv, invoice); r.Duplicate {
			t.Fatalf("after purge the redelivery should be stored anew: %+v", r)
		}
		srv.WaitIdle(20 * time.Second)

		if n := srv.QueryInt(`SELECT count(*) FROM subscriptions WHERE id = 'sub_1' AND status = 'past_due'`); n != 1 {
			t.Errorf("the older event overwrote the newer status")
		}
		if got := srv.QueryInt(`SELECT paid_until FROM subscriptions WHERE id = 'sub_1'`); got != int(monday+month) {
			t.Errorf("paid_until = %d, want %d", got, monday+month)
		}
		if got := srv.QueryInt(`SELECT invoices_paid FROM subscriptions WHERE id = 'sub_1'`); got != 1 {
			t.Errorf("invoices_paid = %d, want 1 (counted exactly once)", got)
		}
		// The next month's invoice extends by one more period.
		stripeSend(t, srv, invoicePaidBody("evt_inv_next", "in_2", monday+month, monday+2*month))
		srv.WaitIdle(20 * time.Second)
		if got := srv.QueryInt(`SELECT paid_until FROM subscriptions WHERE id = 'sub_1'`); got != int(monday+2*month) {
			t.Errorf("paid_until after the second invoice = %d, want %d", got, monday+2*month)
		}
	})
}

// TestInvoicesOutOfOrder: the second month's invoice.paid arriving before
// the first's leaves the subscription paid until the end of the second
// month, as in order; each invoice counts once. Extending paid_until by
// each invoice's period made it three periods.
func TestInvoicesOutOfOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc)
		})
		monday := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).Unix()
		month := int64(30 * 24 * 3600)
		for _, body := range []string{
			invoicePaidBody("evt_inv_2", "in_2", monday+month, monday+2*month),
			invoicePaidBody("evt_inv_1", "in_1", monday, monday+month),
		} {
			if r := stripeSend(t, srv, body); r.Status != http.StatusAccepted || r.Duplicate {
				t.Fatalf("delivery: %+v", r)
			}
			srv.WaitIdle(20 * time.Second) // one at a time: the order is the test
		}
		if got := srv.QueryInt(`SELECT paid_until FROM subscriptions WHERE id = 'sub_1'`); got != int(monday+2*month) {
			t.Errorf("paid_until = %d, want %d (the end of the second month)", got, monday+2*month)
		}
		if got := srv.QueryInt(`SELECT invoices_paid FROM subscriptions WHERE id = 'sub_1'`); got != 2 {
			t.Errorf("invoices_paid = %d, want 2", got)
		}
	})
}

// TestSameSecondUpdatesFirstKept pins the limit the README states: Stripe's
// created is in whole seconds, so of two updates in the same second the one
// that arrives first is kept, even in order.
func TestSameSecondUpdatesFirstKept(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc)
		})
		checkout := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).Unix()
		for _, body := range []string{
			subUpdated("evt_a", checkout, "incomplete"),
			subUpdated("evt_b", checkout, "active"),
		} {
			if r := stripeSend(t, srv, body); r.Status != http.StatusAccepted || r.Duplicate {
				t.Fatalf("delivery: %+v", r)
			}
			srv.WaitIdle(20 * time.Second)
		}
		if n := srv.QueryInt(`SELECT count(*) FROM subscriptions WHERE id = 'sub_1' AND status = 'incomplete'`); n != 1 {
			t.Errorf("the second update of the same second was applied; the README says it is not")
		}
	})
}

// purge deletes every finished event, as retention would weeks later.
func purge(t *testing.T, srv *e2e.Server) {
	t.Helper()
	ops, ok := srv.Svc.Store.(hookbox.Ops)
	if !ok {
		t.Fatalf("store %T has no Ops", srv.Svc.Store)
	}
	res, err := ops.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now()})
	if err != nil || res.Done == 0 {
		t.Fatalf("purge: %+v %v", res, err)
	}
}
