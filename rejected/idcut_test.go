package rejected_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckKeepsIngestIDRules: a GitHub delivery whose (unsigned)
// X-GitHub-Delivery is longer than hookbox.MaxIDLength, or not UTF-8, is
// refused by ingest with 400, and so is a Stripe delivery whose (signed)
// JSON id holds NUL. The log cuts and cleans header values, so a re-check
// must admit none of them: not under the first bytes of the id, nor under
// an id with U+FFFD in place of what was sent, nor with NUL. A delivery
// whose id is exactly MaxIDLength bytes, refused for a secret the source
// has since been given, passes.
func TestRecheckKeepsIngestIDRules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"github-secret-for-review-0123"}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rotated := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"github-secret-rotated-in-0123"}}
		both, err := verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: append(cfg.Secrets, rotated.Secrets...)})
		if err != nil {
			t.Fatal(err)
		}
		scfg := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_stripe-secret-for-review-01"}}
		sv, err := verify.New(scfg)
		if err != nil {
			t.Fatal(err)
		}
		ingest := ingestInto(st)
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources: []server.Source{{Name: "github", Verifier: v}, {Name: "stripe", Verifier: sv}}, Ingest: ingest, Rejections: rec}))
		post := func(source string, hdr http.Header, body []byte, want int) {
			t.Helper()
			req, _ := http.NewRequest("POST", ts.URL+"/webhooks/"+source, bytes.NewReader(body))
			for k, vs := range hdr {
				req.Header[k] = vs
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("%s: ingest answered %d, want %d", source, resp.StatusCode, want)
			}
		}
		body := []byte(`{"action":"opened"}`)
		github := func(cfg verify.Config, id string) http.Header {
			hdr, err := verify.Sign(cfg, body, "x", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			hdr.Set("X-GitHub-Delivery", id)
			hdr.Set("X-GitHub-Event", "issues")
			return hdr
		}
		for _, id := range []string{strings.Repeat("d", hookbox.MaxIDLength+50), "delivery-\xff\xfe"} {
			post("github", github(cfg, id), body, http.StatusBadRequest)
		}
		fits := strings.Repeat("f", hookbox.MaxIDLength)
		post("github", github(rotated, fits), body, http.StatusUnauthorized)
		// Stripe's id is in the signed body: one holding NUL is refused by
		// ingest (PostgreSQL text cannot hold it).
		sbody := []byte(`{"id":"evt_\u0000nul","type":"charge.succeeded"}`)
		shdr, err := verify.Sign(scfg, sbody, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		post("stripe", shdr, sbody, http.StatusBadRequest)
		ts.Close()
		rec.Close()

		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"github": {Verifier: both}, "stripe": {Verifier: sv}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, hookbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 1 || len(evs) != 1 || evs[0].DeliveryID != fits {
			var ids []string
			for _, ev := range evs {
				ids = append(ids, fmt.Sprintf("%q… (%d bytes)", ev.DeliveryID[:min(len(ev.DeliveryID), 24)], len(ev.DeliveryID)))
			}
			t.Fatalf("re-check admitted %+v, ids %q; want only the delivery whose id fits", res.Admitted, ids)
		}
		// Newest first: the Stripe delivery, then the two GitHub ones.
		if len(res.Refused) != 3 || !strings.Contains(res.Refused[0].Reason, "NUL") ||
			res.Refused[1].Reason != rejected.ReasonHeaderAltered || res.Refused[2].Reason != rejected.ReasonHeaderAltered {
			t.Fatalf("refused %+v", res.Refused)
		}
	})
}

// TestRecheckRefusesControlIDs: a Stripe delivery whose signed JSON id
// ends in a line break is refused by ingest with 400 (it could never be
// forwarded: the id goes in a header), and a re-check, which verifies it
// again, refuses it for the same reason instead of storing it.
func TestRecheckRefusesControlIDs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		scfg := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_stripe-secret-for-review-01"}}
		sv, err := verify.New(scfg)
		if err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources: []server.Source{{Name: "stripe", Verifier: sv}}, Ingest: ingestInto(st), Rejections: rec}))
		body := []byte(`{"id":"evt_1\n","type":"charge.succeeded"}`)
		hdr, err := verify.Sign(scfg, body, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", ts.URL+"/webhooks/stripe", bytes.NewReader(body))
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ts.Close()
		rec.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("ingest answered %d, want 400", resp.StatusCode)
		}
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"stripe": {Verifier: sv}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, hookbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 || len(evs) != 0 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, "control character") {
			t.Fatalf("re-check admitted %+v, refused %+v, stored %d; want it refused for its control character", res.Admitted, res.Refused, len(evs))
		}
	})
}
