package service_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckVerifiesTheHeadersIngestVerified: a re-check never admits,
// under the configuration ingest refused it with, a delivery whose sender
// named a header in Connection. Ingest verifies every header sent; the
// log keeps what an event would (KeptHeader drops the headers Connection
// names), and a re-check verified what was left: a bad webhook-signature
// named in Connection and a good svix-signature beside it were refused
// 401 and then admitted. Such a row is now marked as not kept as sent.
func TestRecheckVerifiesTheHeadersIngestVerified(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		c := startConsole(t, dbURL, consoleConfig(rightSecret))
		defer c.stop()
		body := []byte(`{"type":"order.paid","id":"ord_9"}`)
		now := time.Now()
		good, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{rightSecret}}, body, "msg_hop", now)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{wrongSecret}}, body, "msg_hop", now)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", c.url+"/webhooks/polar", bytes.NewReader(body))
		// webhook-* (which ingest prefers) carries a signature the
		// configured secret refuses; svix-* carries one it accepts.
		for k, v := range bad {
			req.Header[k] = v
		}
		for k, v := range good {
			req.Header[strings.Replace(k, "Webhook-", "Svix-", 1)] = v
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connection", "Webhook-Signature")
		if r := do(t, req); r.status != 401 {
			t.Fatalf("ingest: %+v, want 401 (webhook-signature does not verify)", r)
		}
		// The same delivery without Connection is refused too: the
		// configuration refuses it whatever Connection says.
		req2, _ := http.NewRequest("POST", c.url+"/webhooks/polar", bytes.NewReader(body))
		for k, v := range req.Header {
			if k != "Connection" {
				req2.Header[k] = v
			}
		}
		if r := do(t, req2); r.status != 401 {
			t.Fatalf("ingest without Connection: %+v, want 401", r)
		}
		rs := c.awaitRejected(2)
		var res rejected.RecheckResult
		if st := c.call("POST", c.adm+"/admin/rejected/recheck", &res); st != 200 {
			t.Fatalf("re-check: %d", st)
		}
		for _, a := range res.Admitted {
			t.Errorf("re-check under the configuration ingest refused it with admitted rejection %d as event %d (rejections %d, %d)",
				a.RejectionID, a.EventID, rs[0].ID, rs[1].ID)
		}
	})
}
