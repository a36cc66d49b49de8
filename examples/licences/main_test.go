package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/worker"
)

// fastPolicy retries within milliseconds, for tests.
var fastPolicy = worker.Policy{MaxAttempts: 5, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}

const testSecret = "whsec_bGljZW5jZS1leGFtcGxlLXRlc3Qtc2VjcmV0"

const testConfig = `
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["` + testSecret + `"]
    backoff_min: 10ms
    backoff_max: 50ms
`

// mailSink is a fake mail API that counts emails per recipient and order.
type mailSink struct {
	mu   sync.Mutex
	sent []email
	keys map[string]int
}

func (m *mailSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var e email
	if err := json.Unmarshal(b, &e); err != nil {
		http.Error(w, "bad email", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.sent = append(m.sent, e)
	m.keys[r.Header.Get("Idempotency-Key")]++
	m.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// polarDelivery signs an order.paid body with the Standard Webhooks
// library, as Polar does.
func polarDelivery(t *testing.T, msgID, orderID string) (http.Header, []byte) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"type":"order.paid","data":{"id":%q,"customer":{"email":"ada@example.com"}}}`, orderID))
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(msgID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	h.Set("webhook-signature", sig)
	return h, body
}

// TestOneLicenceOneEmailPerOrder: two copies of one delivery (sent at once)
// and a second, different event for the same order give one licence and one
// email; another order gets its own.
func TestOneLicenceOneEmailPerOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink := &mailSink{keys: map[string]int{}}
		mail := httptest.NewServer(sink)
		defer mail.Close()
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc, mail.URL)
		})

		h, body := polarDelivery(t, "msg_copy", "ord_1")
		var wg sync.WaitGroup
		replies := make([]e2e.Reply, 2)
		for i := range replies {
			wg.Add(1)
			go func() { defer wg.Done(); replies[i] = srv.Post("polar", h, body) }()
		}
		wg.Wait()
		for _, r := range replies {
			if r.Status != http.StatusAccepted {
				t.Fatalf("copy: %+v", r)
			}
		}
		if replies[0].Duplicate == replies[1].Duplicate {
			t.Errorf("two copies: exactly one must be new, got %+v", replies)
		}
		h2, body2 := polarDelivery(t, "msg_other_event", "ord_1")
		if r := srv.Post("polar", h2, body2); r.Status != http.StatusAccepted || r.Duplicate {
			t.Fatalf("second event for the order: %+v", r)
		}
		h3, body3 := polarDelivery(t, "msg_second_order", "ord_2")
		srv.Post("polar", h3, body3)

		srv.WaitIdle(20 * time.Second)
		if n := srv.QueryInt(`SELECT count(*) FROM licences WHERE order_id = $1`, "ord_1"); n != 1 {
			t.Errorf("licences for ord_1 = %d, want 1", n)
		}
		if n := srv.QueryInt(`SELECT count(*) FROM licences`); n != 2 {
			t.Errorf("licences = %d, want 2", n)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.sent) != 2 || sink.keys["send:email:ord_1"] != 1 || sink.keys["send:email:ord_2"] != 1 {
			t.Errorf("emails = %d %v, want one per order", len(sink.sent), sink.keys)
		}
		if events := srv.Events("polar"); len(events) != 3 {
			t.Errorf("stored events = %d, want 3 (the copy deduplicated)", len(events))
		}
	})
}

// TestEmailRetriedUntilSent: the mail API fails twice; the email is retried
// by the queue and sent once, and the licence is not issued again.
func TestEmailRetriedUntilSent(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	mail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer mail.Close()
	srv := e2e.Start(t, testConfig, dbtest.SQLiteURL(t), func(svc *service.Service) error {
		svc.Pool.SetPolicy("send:email", fastPolicy)
		return Register(t.Context(), svc, mail.URL)
	})
	h, body := polarDelivery(t, "msg_retry", "ord_9")
	srv.Post("polar", h, body)
	srv.WaitIdle(20 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Errorf("mail API called %d times, want 3 (two failures, one success)", calls)
	}
	if n := srv.QueryInt(`SELECT count(*) FROM licences`); n != 1 {
		t.Errorf("licences = %d, want 1", n)
	}
}
