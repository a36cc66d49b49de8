package service_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/verify"
)

const ingestConfig = `
sources:
  - name: gh
    scheme: github
    secrets: ["gh-secret"]
  - name: gh-open
    scheme: github
    secrets: ["gh-open-secret"]
    allow_identical_bodies: true
  - name: plain
    scheme: none
    id_header: X-Id
  - name: mg
    provider: mailgun
    secrets: ["mg-signing-key"]
    id_header: X-Request-Id
`

// TestBadDeliveryAlone: one delivery the store cannot keep (a 6 KB id),
// sent at once with 100 good ones, gets 400; the 100 get 202 and none
// 503 (issue 13 item 6).
func TestBadDeliveryAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, ingestConfig, dbURL, nil)
		var wg sync.WaitGroup
		replies := make([]e2e.Reply, 101)
		for i := range replies {
			id := fmt.Sprint("good-", i)
			if i == 50 {
				id = "long-" + strings.Repeat("x", 6000)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = srv.Post("plain", http.Header{"X-Id": {id}}, fmt.Appendf(nil, `{"n":%d}`, i))
			}()
		}
		wg.Wait()
		for i, r := range replies {
			want := http.StatusAccepted
			if i == 50 {
				want = http.StatusBadRequest
			}
			if r.Status != want {
				t.Errorf("delivery %d: %d %q, want %d", i, r.Status, r.Error, want)
			}
		}
		if n := len(srv.Events("plain")); n != 100 {
			t.Errorf("%d events stored, want 100", n)
		}
	})
}

// TestReplayedBodyUnderNewID: a GitHub body and signature sent again under
// a fresh X-GitHub-Delivery is a duplicate of the first event, unless the
// source allows identical bodies (issue 13 item 1). So is a Mailgun body
// sent again under a fresh id_header: Mailgun's signature covers a token
// the body is bound to, not the header, and such a replay was stored as a
// new event; and the id hookbox's signing helper (verify.SignRequest,
// hookbox send) was given is in that header, which it left out, so that
// the source refused what it signed.
func TestReplayedBodyUnderNewID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, ingestConfig, dbURL, nil)
		body := []byte(`{"action":"opened","number":7}`)
		first := srv.Send("gh", "11111111-aaaa", body)
		h, err := verify.Sign(srv.Source("gh").Verify(), body, "22222222-bbbb", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		replay := srv.Post("gh", h, body)
		if replay.Status != http.StatusAccepted || !replay.Duplicate || replay.ID != first.ID {
			t.Errorf("replayed body under a new id = %+v, want 202 duplicate of %d", replay, first.ID)
		}
		if n := len(srv.Events("gh")); n != 1 {
			t.Errorf("%d events for gh, want 1", n)
		}
		a := srv.Send("gh-open", "33333333", body)
		b := srv.Send("gh-open", "44444444", body)
		if a.Duplicate || b.Duplicate || a.ID == b.ID {
			t.Errorf("allow_identical_bodies: %+v then %+v, want two new events", a, b)
		}

		h, signed, err := verify.SignRequest(srv.Source("mg").Verify(), []byte(`{"event-data":{"id":"ev-1","event":"delivered"}}`), "req-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		mg := srv.Post("mg", h, signed)
		if mg.Status != http.StatusAccepted {
			t.Fatalf("mailgun delivery signed by SignRequest: %+v", mg)
		}
		h.Set("X-Request-Id", "a-fresh-id")
		if replay := srv.Post("mg", h, signed); replay.Status != http.StatusAccepted || !replay.Duplicate || replay.ID != mg.ID {
			t.Errorf("mailgun body replayed under a fresh id_header = %+v, want 202 duplicate of %d", replay, mg.ID)
		}
		if evs := srv.Events("mg"); len(evs) != 1 || evs[0].DeliveryID != "req-1" {
			t.Errorf("mailgun events = %+v, want one, delivery id req-1", evs)
		}
	})
}
