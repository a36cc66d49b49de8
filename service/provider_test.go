package service_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

const presetConfig = `
sources:
  - {name: slack, provider: slack, secrets: ["slack-signing-secret-1"], store_only: true}
  - {name: zoom, provider: zoom, secrets: ["zoom-secret-token-1"], store_only: true}
  - {name: mailgun, provider: mailgun, secrets: ["mailgun-signing-key-1"], store_only: true}
`

// TestPresetsEndToEnd: over HTTP and a real store, the handshakes of the
// slack and zoom presets are answered and never stored; their events, and
// a mailgun event signed in its body, are stored once.
func TestPresetsEndToEnd(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := startWith(t, dbURL, presetConfig)
		if status, reply := postSigned(t, h, "slack", []byte(`{"type":"url_verification","challenge":"abc123"}`)); status != 200 || reply != `{"challenge":"abc123"}` {
			t.Fatalf("slack handshake: %d %s", status, reply)
		}
		m := hmac.New(sha256.New, []byte("zoom-secret-token-1"))
		m.Write([]byte("plain-xyz"))
		want := `{"encryptedToken":"` + hex.EncodeToString(m.Sum(nil)) + `","plainToken":"plain-xyz"}`
		if status, reply := postSigned(t, h, "zoom", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"plain-xyz"}}`)); status != 200 || reply != want {
			t.Fatalf("zoom handshake: %d %s, want %s", status, reply, want)
		}
		if n := h.count(hookbox.Filter{}); n != 0 {
			t.Fatalf("handshakes stored: %d rows", n)
		}
		event := []byte(`{"type":"event_callback","event_id":"Ev42","event":{"type":"app_mention"}}`)
		for i, dup := range []bool{false, true} {
			if status, reply := postSigned(t, h, "slack", event); status != 202 || (dup != bytes.Contains([]byte(reply), []byte(`"duplicate":true`))) {
				t.Fatalf("slack event copy %d: %d %s", i, status, reply)
			}
		}
		if status, reply := postSigned(t, h, "zoom", []byte(`{"event":"meeting.started","payload":{}}`)); status != 202 {
			t.Fatalf("zoom event: %d %s", status, reply)
		}
		if status, reply := postSigned(t, h, "mailgun", []byte(`{"event-data":{"id":"mg-1","event":"delivered"}}`)); status != 202 {
			t.Fatalf("mailgun event: %d %s", status, reply)
		}
		es, err := h.svc.Store.Events(t.Context(), hookbox.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range es {
			got[e.Source] = e.DeliveryID + " " + e.EventType
		}
		if len(es) != 3 || got["slack"] != "Ev42 app_mention" || got["mailgun"] != "mg-1 delivered" || got["zoom"][64:] != " meeting.started" {
			t.Fatalf("stored %v", got)
		}
	})
}

// TestSlackRateLimitedKeptByBodyHash: Slack's app_rate_limited event has
// no event_id. The slack preset keeps it under its body hash (id_optional),
// once however often Slack sends it again; a source that names its own
// id_field without id_optional still refuses a delivery without the id.
// The preset refused it with 400, and Slack counted a failed delivery.
func TestSlackRateLimitedKeptByBodyHash(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := startWith(t, dbURL, `
sources:
  - {name: slack, provider: slack, secrets: ["slack-signing-secret-1"], store_only: true}
  - {name: strict, provider: slack, id_field: event_id, secrets: ["slack-signing-secret-1"], store_only: true}
`)
		limited := []byte(`{"token":"tok","type":"app_rate_limited","team_id":"T123","minute_rate_limited":1518467820,"api_app_id":"A123"}`)
		for i, dup := range []bool{false, true} {
			if status, reply := postSigned(t, h, "slack", limited); status != 202 || (dup != bytes.Contains([]byte(reply), []byte(`"duplicate":true`))) {
				t.Fatalf("app_rate_limited copy %d: %d %s", i, status, reply)
			}
		}
		if status, reply := postSigned(t, h, "strict", limited); status != 400 || !bytes.Contains([]byte(reply), []byte("event_id")) {
			t.Errorf("app_rate_limited to a source with its own id_field: %d %s, want 400 naming event_id", status, reply)
		}
		es, err := h.svc.Store.Events(t.Context(), hookbox.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(limited)
		if len(es) != 1 || es[0].Source != "slack" || !es[0].IDIsHash || es[0].DeliveryID != hex.EncodeToString(sum[:]) {
			t.Fatalf("stored %+v, want slack's app_rate_limited once, under its body's SHA-256", es)
		}
	})
}

// postSigned posts body to source, signed as the source's provider signs,
// and returns the reply's status and body.
func postSigned(t *testing.T, h *harness, source string, body []byte) (int, string) {
	t.Helper()
	hdr, signed, err := verify.SignRequest(h.source(source).Verify(), body, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/"+source, bytes.NewReader(signed))
	req.Header = hdr
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
