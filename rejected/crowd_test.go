package rejected_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestUnknownNamesCannotEvictASourcesRejections: a real Stripe delivery
// refused because the configured secret is wrong is logged, waiting for
// the operator to fix the secret and re-check it. Then an unauthenticated
// client posts to made-up source names (404s), within the unknown names'
// own rate limit, past the log's count bound: the log is trimmed from the
// largest group, the unknown names', and keeps Stripe's rejection.
func TestUnknownNamesCannotEvictASourcesRejections(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		right := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_the-right-stripe-secret-0123"}}
		wrong := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_a-wrong-stripe-secret-01234"}}
		v, err := verify.New(wrong)
		if err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{MaxCount: 100})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "stripe", Verifier: v}},
			Ingest:     ingestInto(st),
			Rejections: rec}))
		defer ts.Close()
		post := func(path string, hdr http.Header, body []byte) int {
			req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewReader(body))
			for k, vs := range hdr {
				req.Header[k] = vs
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		body := []byte(`{"id":"evt_real_payment","type":"payment_intent.succeeded"}`)
		hdr, err := verify.Sign(right, body, "evt_real_payment", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if status := post("/webhooks/stripe", hdr, body); status != http.StatusUnauthorized {
			t.Fatalf("stripe delivery answered %d, want 401 (wrong secret configured)", status)
		}
		// The flood: unknown names only, no secret needed.
		for i := range 150 {
			post(fmt.Sprintf("/webhooks/guess-%d", i), nil, []byte(`{}`))
		}
		ts.Close()
		rec.Close()

		all, err := st.Rejections(ctx, hookbox.RejectionFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{Source: "stripe"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rjs) != 1 || len(all) != 100 {
			t.Fatalf("the log holds %d rows, %d of them Stripe's; want 100, and the refused Stripe delivery kept", len(all), len(rjs))
		}
	})
}

// TestNoisySourceCannotEvictAnother: a flood of bad signatures to one
// configured source, past the log's count bound, gives up the oldest of
// its own rows; another source's rejections, and the unknown names', stay.
// Once the flood stops, the next source to grow past the others is the one
// trimmed.
func TestNoisySourceCannotEvictAnother(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		rec := rejected.NewRecorder(st, rejected.Options{MaxCount: 100, Burst: 1000})
		record := func(source string, unknown bool, n int) {
			for i := range n {
				rj := rejection(source, fmt.Sprintf(`{"n":%d}`, i))
				rj.UnknownSource = unknown
				rec.Record(rj)
			}
		}
		record("quiet", false, 5)
		record("guess", true, 3)
		record("noisy", false, 150)
		rec.Close()
		count := func(source string) (n int, oldest string) {
			rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{Source: source, WithBody: true, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(rjs) > 0 {
				oldest = string(rjs[len(rjs)-1].Body)
			}
			return len(rjs), oldest
		}
		quiet, _ := count("quiet")
		guess, _ := count("guess")
		noisy, oldest := count("noisy")
		if quiet != 5 || guess != 3 || noisy != 92 || oldest != `{"n":58}` {
			t.Fatalf("after the flood: quiet %d, unknown %d, noisy %d (oldest %s); want 5, 3, and noisy's newest 92", quiet, guess, noisy, oldest)
		}

		// Now the quiet source floods, and the noisy one gives nothing up
		// until quiet is as large.
		rec = rejected.NewRecorder(st, rejected.Options{MaxCount: 100, Burst: 1000})
		record("quiet", false, 60)
		rec.Close()
		quiet, _ = count("quiet")
		noisy, _ = count("noisy")
		if guess, _ := count("guess"); quiet+noisy+guess != 100 || guess != 3 || quiet < 48 || quiet > 49 || noisy < 48 || noisy > 49 {
			t.Fatalf("after quiet's flood: quiet %d, noisy %d, unknown %d; want the two levelled to 97 rows", quiet, noisy, guess)
		}
	})
}
