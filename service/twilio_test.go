package service_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
)

// twilioConfig is one twilio source whose id is Twilio's idempotency
// token, a header the signature does not cover.
func twilioConfig(secret string) string {
	return fmt.Sprintf(`
sources:
  - name: tw
    scheme: twilio
    secrets: [%q]
    public_url: "https://h.example/webhooks/tw"
    id_header: I-Twilio-Idempotency-Token
    store_only: true
`, secret)
}

// twilioCallback is a callback and bodies that Twilio's signature of it
// covers as well: the parameters in another order, a trailing "&", a
// letter percent-encoded.
var (
	twilioCallback = []byte("Body=Pay+100&From=%2B15550001&To=%2B15550002")
	twilioAlike    = [][]byte{
		[]byte("To=%2B15550002&From=%2B15550001&Body=Pay+100"),
		[]byte("Body=Pay+100&From=%2B15550001&To=%2B15550002&"),
		[]byte("Body=P%61y+100&From=%2B15550001&To=%2B15550002"),
	}
)

// postTwilio posts body to the tw source with the signature h under the
// idempotency token id.
func postTwilio(srv *e2e.Server, h http.Header, id string, body []byte) e2e.Reply {
	h = h.Clone()
	h.Set("I-Twilio-Idempotency-Token", id)
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return srv.Post("tw", h, body)
}

// TestTwilioReplayUnderNewID: Twilio signs the decoded, sorted parameters,
// not the body's bytes, and not the idempotency token that is the
// delivery id here. Whoever saw one callback could send it again under a
// new token with its parameters shuffled, and before the body key was
// what the signature covers, each copy was stored as a new event. Each is
// now a duplicate of the callback (202, duplicate, its event id), and one
// event is stored.
func TestTwilioReplayUnderNewID(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, twilioConfig("twilio-auth-token"), dbURL, nil)
		h, err := verify.Sign(srv.Source("tw").Verify(), twilioCallback, "idem-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		first := postTwilio(srv, h, "idem-1", twilioCallback)
		if first.Status != http.StatusAccepted || first.Duplicate {
			t.Fatalf("the callback: %+v, want 202 new", first)
		}
		for i, body := range twilioAlike {
			r := postTwilio(srv, h, fmt.Sprint("idem-replay-", i), body)
			if r.Status != http.StatusAccepted || !r.Duplicate || r.ID != first.ID {
				t.Errorf("%s under a new id: %+v, want 202 duplicate of %d", body, r, first.ID)
			}
		}
		if n := len(srv.Events("tw")); n != 1 {
			t.Errorf("%d events stored for one signed callback, want 1", n)
		}
		// Another callback is another event.
		other := []byte("Body=Pay+200&From=%2B15550001&To=%2B15550002")
		oh, err := verify.Sign(srv.Source("tw").Verify(), other, "idem-2", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r := postTwilio(srv, oh, "idem-2", other); r.Status != http.StatusAccepted || r.Duplicate {
			t.Errorf("another callback: %+v, want 202 new", r)
		}
	})
}

// TestTwilioRecheckKeysWhatIsSigned: a re-check keys an admitted twilio
// delivery as ingest does, by what the signature covers. A reshuffled
// copy of a callback under a new token, refused while the auth token was
// wrong, is admitted once the token is fixed as a duplicate of the
// callback stored meanwhile, not as a second event.
func TestTwilioRecheckKeysWhatIsSigned(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const right, wrong = "twilio-auth-token", "twilio-wrong-token"
		srv := e2e.Start(t, twilioConfig(wrong), dbURL, nil)
		signing := srv.Source("tw").Verify()
		signing.Secrets = []string{right}
		h, err := verify.Sign(signing, twilioCallback, "idem-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r := postTwilio(srv, h, "idem-2", twilioAlike[0]); r.Status != http.StatusUnauthorized {
			t.Fatalf("under the wrong auth token: %+v, want 401", r)
		}
		srv.Stop() // writes the rejection log

		srv = e2e.Start(t, twilioConfig(right), dbURL, nil)
		first := postTwilio(srv, h, "idem-1", twilioCallback)
		if first.Status != http.StatusAccepted || first.Duplicate {
			t.Fatalf("the callback: %+v, want 202 new", first)
		}
		res, err := srv.Svc.Recheck(context.Background(), rejected.RecheckParams{})
		if err != nil || len(res.Admitted) != 1 {
			t.Fatalf("re-check: %+v, %v", res, err)
		}
		if a := res.Admitted[0]; !a.Duplicate || a.EventID != first.ID {
			t.Errorf("re-check admitted %+v, want a duplicate of %d", a, first.ID)
		}
		if n := len(srv.Events("tw")); n != 1 {
			t.Errorf("%d events stored, want 1", n)
		}
	})
}
