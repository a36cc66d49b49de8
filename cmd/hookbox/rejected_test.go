package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestRejectedCommands: list (table and --json) and show mask signature
// values and escape what the sender wrote; recheck with the fixed secret
// admits the delivery as an event, and a second recheck admits nothing.
func TestRejectedCommands(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const secret = "whsec_Y2xpLXJlY2hlY2stc2VjcmV0LWZvci10ZXN0"
		st := dbtest.Open(t, dbURL)
		body := []byte(`{"type":"order.paid"}`)
		hdr, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}}, body, "msg_cli", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		hdr.Set("X-Note", "\x1b[2Jcleared")
		_, err = st.AddRejections(context.Background(), []hookbox.Rejection{
			{Source: "polar", ReceivedAt: time.Now(), RemoteAddr: "192.0.2.1", Status: 401, Reason: "no signature matches",
				Header: hdr, Body: body, BodySize: int64(len(body)), BodyComplete: true},
			{Source: "typo\x1b[31m", UnknownSource: true, ReceivedAt: time.Now(), Status: 404, Reason: "unknown source", BodySize: -1},
		}, hookbox.RejectionBounds{})
		if err != nil {
			t.Fatal(err)
		}
		out := mustCLI(t, "rejected", "list", "--db", dbURL)
		if !strings.Contains(out, `typo\x1b[31m (unknown)`) || !strings.Contains(out, "polar") || strings.Contains(out, "\x1b") {
			t.Errorf("list:\n%s", out)
		}
		var views []server.RejectionView
		if err := json.Unmarshal([]byte(mustCLI(t, "rejected", "list", "--db", dbURL, "--json")), &views); err != nil || len(views) != 2 {
			t.Fatalf("list --json: %v, %d", err, len(views))
		}
		sig := hdr.Get("Webhook-Signature")
		show := mustCLI(t, "rejected", "show", fmt.Sprint(views[1].ID), "--db", dbURL)
		if strings.Contains(show, sig) || !strings.Contains(show, "Webhook-Signature: [REDACTED]") || strings.Contains(show, "\x1b") {
			t.Errorf("show:\n%s", show)
		}
		if got := mustCLI(t, "rejected", "show", fmt.Sprint(views[1].ID), "--db", dbURL, "--body"); got != string(body) {
			t.Errorf("show --body: %q", got)
		}

		cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
		cfg := fmt.Sprintf("sources:\n  - name: polar\n    scheme: standard-webhooks\n    secrets: [%q]\n    store_only: true\n", secret)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out = mustCLI(t, "rejected", "recheck", "--db", dbURL, "--config", cfgPath)
		if !strings.Contains(out, "stored as event") || !strings.Contains(out, "admitted 1, refused 1") {
			t.Errorf("recheck:\n%s", out)
		}
		evs, err := st.Events(context.Background(), hookbox.Filter{})
		if err != nil || len(evs) != 1 || evs[0].DeliveryID != "msg_cli" {
			t.Errorf("events after recheck: %+v %v", evs, err)
		}
		if out := mustCLI(t, "rejected", "recheck", "--db", dbURL, "--config", cfgPath); !strings.Contains(out, "admitted 0") {
			t.Errorf("second recheck:\n%s", out)
		}
	})
}
