package rejected_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckDoesNotStoreHandshake: Slack's url_verification is a
// handshake that ingest answers and never stores. Sent while the source's
// signing secret was wrong, it is refused (401) and logged; once the secret
// is fixed, a re-check must not store it as an event either.
func TestRecheckDoesNotStoreHandshake(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const good, wrong = "slack-signing-secret-good-0123", "slack-signing-secret-wrong-012"
		cfgFor := func(secret string) verify.Config {
			return config.Source{Name: "slack", Provider: "slack", Secrets: []string{secret}}.WithPreset().Verify()
		}
		verifier := func(secret string) verify.Verifier {
			v, err := verify.New(cfgFor(secret))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		ingest := ingestInto(st)
		body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
		post := func(url string) (int, string) {
			hdr, err := verify.Sign(cfgFor(good), body, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("POST", url+"/webhooks/slack", bytes.NewReader(body))
			for k, vs := range hdr {
				req.Header[k] = vs
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			return resp.StatusCode, b.String()
		}

		// The source is configured with the wrong secret: the handshake is refused and logged.
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources: []server.Source{{Name: "slack", Verifier: verifier(wrong)}}, Ingest: ingest, Rejections: rec}))
		if status, _ := post(ts.URL); status != http.StatusUnauthorized {
			t.Fatalf("wrong secret answered %d, want 401", status)
		}
		ts.Close()
		rec.Close()

		// With the right secret, ingest answers the handshake and stores nothing.
		ts = httptest.NewServer(server.New(server.Config{
			Sources: []server.Source{{Name: "slack", Verifier: verifier(good)}}, Ingest: ingest}))
		status, reply := post(ts.URL)
		ts.Close()
		if status != http.StatusOK {
			t.Fatalf("right secret answered %d %s, want 200 with the challenge", status, reply)
		}
		if evs, err := st.Events(ctx, hookbox.Filter{}); err != nil || len(evs) != 0 {
			t.Fatalf("ingest stored the handshake: %+v, %v", evs, err)
		}

		// A re-check with the fixed secret must not store the handshake.
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"slack": {Verifier: verifier(good)}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, hookbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 || len(evs) != 0 {
			t.Fatalf("re-check admitted the url_verification handshake as an event: result %+v; events %+v", res, evs)
		}
		if len(res.Refused) != 1 || res.Refused[0].Reason != rejected.ReasonHandshake {
			t.Fatalf("refused %+v, want the one rejection refused as a handshake", res.Refused)
		}
	})
}
