package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// licenceAPI is a fake licensing service that deduplicates by
// Idempotency-Key, as real ones do: a repeat gets the licence minted for
// the first request. loseReplies makes it mint and then answer 503 that
// many times, as if the reply were lost on the way back.
type licenceAPI struct {
	mu          sync.Mutex
	requests    map[string]int    // Idempotency-Key → requests
	minted      map[string]string // Idempotency-Key → licence key
	loseReplies int
}

func newLicenceAPI() *licenceAPI {
	return &licenceAPI{requests: map[string]int{}, minted: map[string]string{}}
}

func (a *licenceAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OrderID string `json:"order_id"`
	}
	idem := r.Header.Get("Idempotency-Key")
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.OrderID == "" || idem == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.requests[idem]++
	key, ok := a.minted[idem]
	if !ok {
		key = fmt.Sprintf("LIC-%s-%d", req.OrderID, len(a.minted)+1)
		a.minted[idem] = key
	}
	lose := a.loseReplies > 0
	if lose {
		a.loseReplies--
	}
	a.mu.Unlock()
	if lose {
		http.Error(w, "reply lost", http.StatusServiceUnavailable)
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"key": key})
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
// email; another order gets its own. Both events of the order run Prepare,
// and the licensing service mints one licence for the order.
func TestOneLicenceOneEmailPerOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink := &mailSink{keys: map[string]int{}}
		mail := httptest.NewServer(sink)
		defer mail.Close()
		api := newLicenceAPI()
		licences := httptest.NewServer(api)
		defer licences.Close()
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc, mail.URL, licences.URL)
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
		api.mu.Lock()
		defer api.mu.Unlock()
		if n := api.requests[licenceIdempotencyKey("ord_1")]; n < 2 {
			t.Errorf("licensing service asked %d times for ord_1, want at least 2 (a Prepare per stored event)", n)
		}
		if len(api.minted) != 2 {
			t.Errorf("licensing service minted %v, want one licence per order", api.minted)
		}
		for _, ord := range []string{"ord_1", "ord_2"} {
			checkIssued(t, srv, sink.sent, ord, api.minted[licenceIdempotencyKey(ord)])
		}
	})
}

// TestLicenceReplyLost: the licensing service mints the licence but its
// reply is lost twice, so Prepare fails and runs again, three times in all.
// The repeats carry the same idempotency key: one licence is minted, stored
// and emailed.
func TestLicenceReplyLost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		sink := &mailSink{keys: map[string]int{}}
		mail := httptest.NewServer(sink)
		defer mail.Close()
		api := newLicenceAPI()
		api.loseReplies = 2
		licences := httptest.NewServer(api)
		defer licences.Close()
		srv := e2e.Start(t, testConfig, dbURL, func(svc *service.Service) error {
			return Register(t.Context(), svc, mail.URL, licences.URL)
		})
		h, body := polarDelivery(t, "msg_lost_reply", "ord_5")
		if r := srv.Post("polar", h, body); r.Status != http.StatusAccepted {
			t.Fatalf("delivery: %+v", r)
		}
		srv.WaitIdle(20 * time.Second)

		events := srv.Events("polar")
		if len(events) != 1 || events[0].Status != "done" || events[0].Attempts != 3 {
			t.Fatalf("events = %+v, want one, done after 3 attempts", events)
		}
		api.mu.Lock()
		defer api.mu.Unlock()
		if n := api.requests[licenceIdempotencyKey("ord_5")]; n != 3 {
			t.Errorf("licensing service asked %d times, want 3 (two lost replies)", n)
		}
		if len(api.minted) != 1 {
			t.Errorf("licensing service minted %v, want one licence", api.minted)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.sent) != 1 {
			t.Errorf("emails = %d, want 1", len(sink.sent))
		}
		checkIssued(t, srv, sink.sent, "ord_5", api.minted[licenceIdempotencyKey("ord_5")])
	})
}

// checkIssued checks that order has one stored licence, the one the
// licensing service minted, and that exactly one email carried it.
func checkIssued(t *testing.T, srv *e2e.Server, sent []email, order, minted string) {
	t.Helper()
	if minted == "" {
		t.Errorf("no licence minted for %s", order)
		return
	}
	if n := srv.QueryInt(`SELECT count(*) FROM licences WHERE order_id = $1 AND licence_key = $2`, order, minted); n != 1 {
		t.Errorf("licence %s of %s stored %d times, want once", minted, order, n)
	}
	n := 0
	for _, e := range sent {
		if strings.Contains(e.Body, minted) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("licence %s of %s emailed %d times, want once", minted, order, n)
	}
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
		return Register(t.Context(), svc, mail.URL, "") // the key minted in Prepare
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
