package service_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// webflowSecret signs the deliveries of TestMillisecondTimestamps.
const webflowSecret = "webflow-client-secret-7d1e"

// TestMillisecondTimestamps: a sender that signs a timestamp in
// milliseconds, as Webflow does (X-Webflow-Timestamp, 13 digits, an
// HMAC-SHA256 in hex over "{timestamp}:{body}" in X-Webflow-Signature),
// signed here by hand with crypto/hmac and sent over HTTP to a running
// hookbox. With timestamp_unit: ms its deliveries are stored, and its
// tolerance holds in milliseconds; with seconds (the default) every
// genuine delivery was refused as "timestamp outside tolerance", which
// sent operators after clock skew: it is now refused saying the
// timestamp is in milliseconds and what to set. hookbox send's signature
// (verify.Sign) for the ms source is accepted too.
func TestMillisecondTimestamps(t *testing.T) {
	h := startWith(t, "sqlite:"+filepath.Join(t.TempDir(), "hookbox.db"), `
sources:
  - name: webflow
    scheme: hmac
    header: X-Webflow-Signature
    timestamp_header: X-Webflow-Timestamp
    timestamp_unit: ms
    signed: "{timestamp}:{body}"
    secrets: ["`+webflowSecret+`"]
    store_only: true
  - name: webflow-in-seconds
    scheme: hmac
    header: X-Webflow-Signature
    timestamp_header: X-Webflow-Timestamp
    signed: "{timestamp}:{body}"
    secrets: ["`+webflowSecret+`"]
    store_only: true
`)
	post := func(source string, ts int64, body string) reply {
		t.Helper()
		text := strconv.FormatInt(ts, 10)
		m := hmac.New(sha256.New, []byte(webflowSecret))
		m.Write([]byte(text + ":" + body))
		req, err := http.NewRequest(http.MethodPost, h.url+"/webhooks/"+source, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Webflow-Timestamp", text)
		req.Header.Set("X-Webflow-Signature", hex.EncodeToString(m.Sum(nil)))
		return do(t, req)
	}
	form := func(id string) string {
		return `{"triggerType":"form_submission","payload":{"name":"Contact","id":"` + id + `"}}`
	}

	now := time.Now()
	if r := post("webflow", now.UnixMilli(), form("f1")); r.status != http.StatusAccepted || r.Duplicate {
		t.Fatalf("ms source, ms timestamp: %+v", r)
	}
	if r := post("webflow", now.UnixMilli(), form("f1")); r.status != http.StatusAccepted || !r.Duplicate {
		t.Fatalf("ms source, the sender's retry: %+v, want a duplicate", r)
	}
	// The tolerance (5m) is judged in milliseconds: an hour-old or a
	// future one is out of it.
	for _, ts := range []int64{now.Add(-time.Hour).UnixMilli(), now.Add(10 * time.Minute).UnixMilli()} {
		if r := post("webflow", ts, form("f2")); r.status != http.StatusUnauthorized || r.Error != "hmac: timestamp outside tolerance" {
			t.Fatalf("ms source, timestamp %d: %+v, want 401 outside tolerance", ts, r)
		}
	}
	// Sent in seconds to the ms source: refused, saying so.
	if r := post("webflow", now.Unix(), form("f3")); r.status != http.StatusUnauthorized ||
		r.Error != "hmac: timestamp is in seconds, not milliseconds; set timestamp_unit: s (or leave it out)" {
		t.Fatalf("ms source, seconds timestamp: %+v", r)
	}

	// The same genuine delivery at a source left in seconds: refused with
	// the unit to set, not as a tolerance problem, and nothing secret.
	r := post("webflow-in-seconds", now.UnixMilli(), form("f4"))
	if r.status != http.StatusUnauthorized || r.Error != "hmac: timestamp is in milliseconds; set timestamp_unit: ms" {
		t.Fatalf("seconds source, ms timestamp: %+v, want 401 saying the timestamp is in milliseconds", r)
	}
	if strings.Contains(r.Error, webflowSecret) {
		t.Fatalf("reply names the secret: %q", r.Error)
	}
	// A seconds timestamp is still what that source takes.
	if r := post("webflow-in-seconds", now.Unix(), form("f5")); r.status != http.StatusAccepted {
		t.Fatalf("seconds source, seconds timestamp: %+v", r)
	}

	// hookbox send signs in the source's unit.
	req := h.signed("webflow", "", []byte(form("f6")))
	if ts := req.Header.Get("X-Webflow-Timestamp"); len(ts) != 13 {
		t.Fatalf("verify.Sign's timestamp %q, want 13 digits", ts)
	}
	if r := do(t, req); r.status != http.StatusAccepted || r.Duplicate {
		t.Fatalf("verify.Sign for the ms source: %+v", r)
	}
	if n := h.count(hookbox.Filter{Source: "webflow"}); n != 2 {
		t.Fatalf("webflow rows = %d, want 2", n)
	}
	if n := h.count(hookbox.Filter{Source: "webflow-in-seconds"}); n != 1 {
		t.Fatalf("webflow-in-seconds rows = %d, want 1", n)
	}
}
