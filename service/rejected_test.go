package service_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

const (
	rightSecret = "whsec_cmlnaHQtc2VjcmV0LWZvci1yZWNoZWNr"
	wrongSecret = "whsec_d3Jvbmctc2VjcmV0LWZvci1yZWNoZWNr"
	consoleTok  = "console-admin-token-for-tests"
)

// consoleConfig is one standard-webhooks source with secret, an admin
// token and a separate admin listener.
func consoleConfig(secret string) string {
	return fmt.Sprintf(`
admin_token: %q
admin_listen: "127.0.0.1:0"
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: [%q]
    store_only: true
`, consoleTok, secret)
}

// console is a running service with a separate admin listener.
type console struct {
	t        *testing.T
	svc      *service.Service
	url, adm string
	stop     func()
}

func startConsole(t *testing.T, dbURL, cfgText string) *console {
	t.Helper()
	srv := e2e.Start(t, cfgText, dbURL, nil)
	return &console{t: t, svc: srv.Svc, url: srv.URL, adm: srv.Admin, stop: func() { srv.Stop() }}
}

// call makes a request with the admin token and decodes a JSON reply
// into out (when not nil).
func (c *console) call(method, url string, out any) int {
	c.t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+consoleTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v in %q", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// awaitRejected waits until the log lists n rejections (the writer runs
// in the background) and returns them.
func (c *console) awaitRejected(n int) []server.RejectionView {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rs []server.RejectionView
		if st := c.call("GET", c.adm+"/admin/rejected", &rs); st != 200 {
			c.t.Fatalf("GET /admin/rejected: %d", st)
		}
		if len(rs) >= n || time.Now().After(deadline) {
			if len(rs) != n {
				c.t.Fatalf("rejected log lists %d, want %d", len(rs), n)
			}
			return rs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func signedPost(t *testing.T, url, secret, id string, body []byte, at time.Time) *http.Request {
	t.Helper()
	hdr, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}}, body, id, at)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// TestRejectedThenRecheck is the set-up mistake the log exists for: a
// delivery signed with the secret the sender has, refused because hookbox
// was given another one, shows up in the log (signature masked, to the
// admin listener only); once the secret is fixed, a re-check admits it as
// an ordinary event, once, and the sender's retry is a duplicate of it.
func TestRejectedThenRecheck(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		c := startConsole(t, dbURL, consoleConfig(wrongSecret))
		body := []byte(`{"type":"order.paid","id":"ord_7"}`)
		if r := do(t, signedPost(t, c.url+"/webhooks/polar", rightSecret, "msg_fixme", body, time.Now())); r.status != 401 {
			t.Fatalf("wrong secret: %+v, want 401", r)
		}
		req, _ := http.NewRequest("POST", c.url+"/webhooks/nosuch", strings.NewReader(`{"x":1}`))
		if r := do(t, req); r.status != 404 {
			t.Fatalf("unknown source: %+v", r)
		}
		rs := c.awaitRejected(2)
		unknown, bad := rs[0], rs[1]
		if !unknown.UnknownSource || unknown.Source != "nosuch" || unknown.Status != 404 || unknown.BodySize != 7 || !unknown.BodyComplete {
			t.Errorf("unknown source logged as %+v", unknown)
		}
		if bad.Source != "polar" || bad.Status != 401 || bad.BodySize != int64(len(body)) || !bad.BodyComplete ||
			bad.Header.Get("Webhook-Signature") != redact.Mask || bad.Header.Get("Webhook-Id") != "msg_fixme" || bad.Body != nil {
			t.Errorf("wrong-secret delivery logged as %+v", bad)
		}
		var one server.RejectionView
		if st := c.call("GET", fmt.Sprintf("%s/admin/rejected/%d", c.adm, bad.ID), &one); st != 200 || !bytes.Equal(one.Body, body) ||
			one.Header.Get("Webhook-Signature") != redact.Mask {
			t.Errorf("one rejection: %d %+v", st, one)
		}
		// The admin endpoints live on the admin listener only.
		if st := c.call("GET", c.url+"/admin/rejected", nil); st != 404 {
			t.Errorf("/admin/rejected on the webhook port: %d, want 404", st)
		}
		if st := c.call("GET", c.url+"/metrics", nil); st != 404 {
			t.Errorf("/metrics on the webhook port: %d, want 404", st)
		}
		if st := c.call("GET", c.adm+"/metrics", nil); st != 200 {
			t.Errorf("/metrics on the admin port: %d", st)
		}
		// Re-check under the wrong secret admits nothing.
		var res rejected.RecheckResult
		if c.call("POST", c.adm+"/admin/rejected/recheck", &res); len(res.Admitted) != 0 || len(res.Refused) != 2 {
			t.Errorf("re-check under the same config: %+v", res)
		}
		c.stop()

		// The secret fixed: a dry run says what would happen, the real
		// re-check stores the event.
		c = startConsole(t, dbURL, consoleConfig(rightSecret))
		if c.call("POST", c.adm+"/admin/rejected/recheck?dry_run=true", &res); len(res.Admitted) != 1 || res.Admitted[0].EventID != 0 || !res.DryRun {
			t.Fatalf("dry re-check: %+v", res)
		}
		var evs []hookbox.Event
		c.call("GET", c.adm+"/admin/events", &evs)
		if len(evs) != 0 {
			t.Fatalf("a dry re-check stored %d events", len(evs))
		}
		c.call("POST", c.adm+"/admin/rejected/recheck", &res)
		if len(res.Admitted) != 1 || res.Admitted[0].RejectionID != bad.ID || res.Admitted[0].EventID == 0 || res.Admitted[0].Duplicate {
			t.Fatalf("re-check: %+v", res)
		}
		if len(res.Refused) != 1 || res.Refused[0].Reason != rejected.ReasonNoSource {
			t.Errorf("re-check refused %+v, want the unknown source's delivery", res.Refused)
		}
		ev, err := c.svc.Store.Event(context.Background(), res.Admitted[0].EventID)
		if err != nil || ev.DeliveryID != "msg_fixme" || ev.EventType != "order.paid" || !bytes.Equal(ev.Payload, body) {
			t.Fatalf("admitted event: %+v %v", ev, err)
		}
		// Admitted once: a second re-check leaves it alone, and the
		// sender's own retry is a duplicate.
		var again rejected.RecheckResult
		if c.call("POST", c.adm+"/admin/rejected/recheck", &again); len(again.Admitted) != 0 {
			t.Errorf("second re-check admitted %+v", again.Admitted)
		}
		if r := do(t, signedPost(t, c.url+"/webhooks/polar", rightSecret, "msg_fixme", body, time.Now())); r.status != 202 || !r.Duplicate || r.ID != ev.ID {
			t.Errorf("the sender's retry: %+v, want a duplicate of %d", r, ev.ID)
		}
		var shown server.RejectionView
		c.call("GET", fmt.Sprintf("%s/admin/rejected/%d", c.adm, bad.ID), &shown)
		if shown.AdmittedEventID != ev.ID {
			t.Errorf("the rejection does not name its event: %+v", shown)
		}
	})
}

// TestRecheckRoutesLikeIngest proves that a re-check stores a delivery as
// ingest would, routed by the source's named targets or store_only: a
// delivery to a source with a forward target and one to a store_only
// source, both refused for a wrong secret, are admitted once the secret
// is fixed as FanOut events; the first gets one delivery to its target,
// which the workers forward to it, and the second none (stored, never
// due). Without the routing, both were plain pending events that no
// worker runs, and the target never got the delivery.
func TestRecheckRoutesLikeIngest(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		app := newReceiver(t)
		cfg := func(secret string) string {
			return fmt.Sprintf(`
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: [%q]
    targets:
      - {name: app, forward: %s}
  - name: archive
    scheme: standard-webhooks
    secrets: [%q]
    store_only: true
`, secret, app.srv.URL, secret)
		}
		ctx := context.Background()
		srv := e2e.Start(t, cfg(wrongSecret), dbURL, nil)
		body := []byte(`{"type":"order.paid","id":"ord_9"}`)
		for _, source := range []string{"shop", "archive"} {
			if r := do(t, signedPost(t, srv.URL+"/webhooks/"+source, rightSecret, "msg_routed", body, time.Now())); r.status != 401 {
				t.Fatalf("wrong secret for %s: %+v, want 401", source, r)
			}
		}
		waitFor(t, 10*time.Second, "two rejections in the log", func() bool {
			rs, err := srv.Svc.Store.Rejections(ctx, hookbox.RejectionFilter{})
			return err == nil && len(rs) == 2
		})
		srv.Stop()

		srv = e2e.Start(t, cfg(rightSecret), dbURL, nil)
		res, err := srv.Svc.Recheck(ctx, rejected.RecheckParams{})
		if err != nil || len(res.Admitted) != 2 || len(res.Refused) != 0 {
			t.Fatalf("re-check: %+v, %v", res, err)
		}
		events := map[string]hookbox.Event{}
		for _, a := range res.Admitted {
			ev, err := srv.Svc.Store.Event(ctx, a.EventID)
			if err != nil || a.Duplicate {
				t.Fatalf("admitted %+v: %+v, %v", a, ev, err)
			}
			events[ev.Source] = ev
		}
		shop, archive := events["shop"], events["archive"]
		if !shop.FanOut || !archive.FanOut {
			t.Fatalf("admitted events: shop FanOut=%v status %s, archive FanOut=%v status %s; want both FanOut",
				shop.FanOut, shop.Status, archive.FanOut, archive.Status)
		}
		children := func(ev hookbox.Event) []hookbox.Event {
			t.Helper()
			ds, err := srv.Svc.Store.Events(ctx, hookbox.Filter{Parent: ev.ID})
			if err != nil {
				t.Fatal(err)
			}
			return ds
		}
		if ds := children(shop); len(ds) != 1 || ds[0].Target != "app" || ds[0].Source != hookbox.QueueName("shop", "app") {
			t.Fatalf("shop's event has deliveries %+v, want one to app", ds)
		}
		if ds := children(archive); len(ds) != 0 {
			t.Errorf("store_only event has deliveries %+v, want none", ds)
		}
		waitFor(t, 30*time.Second, "the target to receive the admitted delivery", func() bool { return len(app.requests()) == 1 })
		if got := app.requests()[0]; got.idemKey != "shop/app:msg_routed" || !bytes.Equal(got.body, body) {
			t.Errorf("the target received %q %q", got.idemKey, got.body)
		}
		srv.WaitIdle(30 * time.Second)
		if ev, err := srv.Svc.Store.Event(ctx, archive.ID); err != nil || ev.Status != hookbox.StatusStored {
			t.Errorf("store_only event: %+v, %v, want stored", ev, err)
		}
	})
}

// TestRecheckHonoursAllowIPs proves that a re-check applies a source's
// allow_ips to the address each rejection was recorded from, as the
// server applies them to a delivery: a delivery from 127.0.0.1 to a
// source not yet configured is kept whole; once the source is configured
// with no signature and allow_ips that exclude 127.0.0.1, a re-check
// refuses it with ReasonAddressRefused and stores nothing, while the
// same configuration allowing 127.0.0.1 would admit it. Without the
// check, anyone could have a delivery admitted to such a source by
// sending it before the source existed.
func TestRecheckHonoursAllowIPs(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		cfg := func(allow string) string {
			return fmt.Sprintf(`
sources:
  - name: internal
    scheme: none
    allow_ips: [%q]
`, allow)
		}
		srv := e2e.Start(t, `
sources:
  - name: other
    scheme: none
    allow_ips: ["127.0.0.1/32"]
`, dbURL, nil)
		req, _ := http.NewRequest("POST", srv.URL+"/webhooks/internal", strings.NewReader(`{"forged":true}`))
		if r := do(t, req); r.status != 404 {
			t.Fatalf("unknown source: %+v, want 404", r)
		}
		waitFor(t, 10*time.Second, "the rejection in the log", func() bool {
			rs, err := srv.Svc.Store.Rejections(ctx, hookbox.RejectionFilter{})
			return err == nil && len(rs) == 1
		})
		rs, err := srv.Svc.Store.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rs) != 1 || rs[0].RemoteAddr != "127.0.0.1" || !rs[0].BodyComplete {
			t.Fatalf("rejection: %+v, %v", rs, err)
		}
		rj := rs[0]
		srv.Stop()

		// Allowed from 127.0.0.1 it would pass (dry run: nothing stored).
		srv = e2e.Start(t, cfg("127.0.0.1/32"), dbURL, nil)
		res, err := srv.Svc.Recheck(ctx, rejected.RecheckParams{DryRun: true})
		if err != nil || len(res.Admitted) != 1 || len(res.Refused) != 0 {
			t.Fatalf("dry re-check with 127.0.0.1 allowed: %+v, %v", res, err)
		}
		srv.Stop()

		srv = e2e.Start(t, cfg("10.9.9.9/32"), dbURL, nil)
		res, err = srv.Svc.Recheck(ctx, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 || len(res.Refused) != 1 || res.Refused[0].RejectionID != rj.ID ||
			res.Refused[0].Reason != rejected.ReasonAddressRefused {
			t.Fatalf("re-check with allow_ips excluding 127.0.0.1: %+v, want refused: %s", res, rejected.ReasonAddressRefused)
		}
		if evs := srv.Events("internal"); len(evs) != 0 {
			t.Errorf("re-check stored %d events from a refused address", len(evs))
		}
		if got, err := srv.Svc.Store.Rejection(ctx, rj.ID); err != nil || got.AdmittedEventID != 0 {
			t.Errorf("rejection after the refused re-check: %+v, %v", got, err)
		}
	})
}

// TestRecheckRefusesCompressedBody: a compressed delivery (a
// Content-Encoding other than identity) logged with its whole body, as an
// unknown source's 404 is, is refused by a re-check once the source
// exists, as ingest refuses it (415); it was admitted and stored
// compressed, and its app forwarded gzip bytes it was not told of.
func TestRecheckRefusesCompressedBody(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		cfg := consoleConfig(rightSecret)
		c := startConsole(t, dbURL, cfg)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(`{"order":"o-1"}`))
		zw.Close()
		req, _ := http.NewRequest("POST", c.url+"/webhooks/late", bytes.NewReader(gz.Bytes()))
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("X-Id", "d-1")
		if r := do(t, req); r.status != http.StatusNotFound {
			t.Fatalf("unknown source: %+v, want 404", r)
		}
		rs := c.awaitRejected(1)
		if !rs[0].BodyComplete {
			t.Fatalf("the 404's body was not kept whole: %+v", rs[0])
		}
		c.stop()
		c = startConsole(t, dbURL, cfg+`
  - name: late
    scheme: none
    id_header: X-Id
    store_only: true
`)
		var res rejected.RecheckResult
		c.call("POST", fmt.Sprintf("%s/admin/rejected/recheck?id=%d", c.adm, rs[0].ID), &res)
		if len(res.Admitted) != 0 || len(res.Refused) != 1 || res.Refused[0].Reason != rejected.ReasonCompressed {
			t.Errorf("re-check of a compressed body: %+v, want it refused: %q", res, rejected.ReasonCompressed)
		}
	})
}
