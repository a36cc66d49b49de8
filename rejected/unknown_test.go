package rejected_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestUnknownNameMasksCredentials: a sender set up with the
// right token (or the secret in an hmac source's signature header) but a
// path that names no source (a typo, "tok-prod" for "tok") is logged as an
// unknown name. Its headers are kept as KeptHeader keeps them, unmarked,
// so a view without the configuration (`rejected list --json` with --db
// alone) prints the configured token header X-Shared and signature header
// X-Sig in clear, which a row of the configured source masks.
func TestUnknownNameMasksCredentials(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const token, secret = "TokenSecretValue999", "HmacSecretValue-777"
		tok, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Header: "X-Shared", Secrets: []string{token}, IDHeader: "X-Delivery-Id"})
		if err != nil {
			t.Fatal(err)
		}
		hm, err := verify.New(verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Secrets: []string{secret}, IDHeader: "X-Id"})
		if err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "tok", Verifier: tok}, {Name: "hm", Verifier: hm}},
			Ingest:     func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) { return hookbox.Receipt{}, nil },
			Rejections: rec}))
		post := func(path, header, value string) {
			req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewReader([]byte(`{"id":"a"}`)))
			req.Header.Set(header, value)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("answered %d, want 404", resp.StatusCode)
			}
		}
		post("/webhooks/tok-prod", "X-Shared", token)
		post("/webhooks/hm-prod", "X-Sig", secret)
		ts.Close()
		rec.Close()
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 2 {
			t.Fatalf("%d rejections (%v), want 2", len(rjs), err)
		}
		for _, rj := range rjs {
			v := server.ViewRejection(rj, redact.ShowHeader, true)
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), token) || strings.Contains(string(b), secret) {
				t.Errorf("rejection %d (unknown name %q): the view without the configuration shows a configured credential header in clear: %s",
					rj.ID, rj.Source, v.Header)
			}
		}
	})
}
