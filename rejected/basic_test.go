package rejected_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckBasicSourceSaysWhy: a basic-auth source whose id_field is
// misconfigured refuses a correctly authenticated delivery with 400 (its
// body was read and logged whole). The log never keeps the Authorization
// header (it holds the password), so once id_field is fixed a re-check
// cannot verify the delivery, and says so, rather than that the header is
// missing, as if the sender had not sent it.
func TestRecheckBasicSourceSaysWhy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		basic := func(idField string) verify.Verifier {
			v, err := verify.New(verify.Config{Scheme: verify.SchemeBasic, Secrets: []string{"hooks:basic-password-0123"}, IDField: idField})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "app", Verifier: basic("delivery_id")}},
			Ingest:     ingestInto(st),
			Rejections: rec}))
		req, _ := http.NewRequest("POST", ts.URL+"/webhooks/app", bytes.NewReader([]byte(`{"id":"e-1","type":"x"}`)))
		req.SetBasicAuth("hooks", "basic-password-0123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answered %d, want 400 (id_field misconfigured)", resp.StatusCode)
		}
		ts.Close()
		rec.Close()
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"app": {Verifier: basic("id")}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 || len(res.Refused) != 1 || res.Refused[0].Reason != rejected.ReasonCredentialsNotLogged {
			t.Fatalf("re-check of a basic source's delivery: %+v, want it refused as one whose credentials are not logged", res)
		}
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{})
		if err != nil || len(rjs) != 1 {
			t.Fatalf("%d rejections, %v", len(rjs), err)
		}
		if _, ok := rjs[0].Header["Authorization"]; ok {
			t.Fatalf("the log kept the Authorization header")
		}
	})
}
