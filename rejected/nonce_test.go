package rejected_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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

// mailgunBody is a Mailgun delivery signed as Mailgun documents it (hex
// HMAC-SHA256 of timestamp then token), with the given event data.
func mailgunBody(key, token string, ts int64, eventData string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "%d%s", ts, token)
	return []byte(fmt.Sprintf(`{"signature":{"timestamp":"%d","token":"%s","signature":"%s"},"event-data":%s}`,
		ts, token, hex.EncodeToString(m.Sum(nil)), eventData))
}

// mailgunHarness is a real server for one mailgun source over a real store,
// recording its refusals.
type mailgunHarness struct {
	t   *testing.T
	st  dbtest.Store
	url string
}

// startMailgun serves a mailgun source keyed with key until the test ends;
// stop waits for its handlers and writes what they recorded.
func startMailgun(t *testing.T, st dbtest.Store, key string) (h *mailgunHarness, stop func()) {
	v, err := verify.New(verify.Config{Scheme: verify.SchemeMailgun, Secrets: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	rec := rejected.NewRecorder(st, rejected.Options{})
	ts := httptest.NewServer(server.New(server.Config{
		Sources:    []server.Source{{Name: "mailgun", Verifier: v}, {Name: "mailgun-b", Verifier: v}},
		Ingest:     ingestInto(st),
		Rejections: rec,
		UseNonce: func(ctx context.Context, n hookbox.Nonce) (bool, error) {
			ok, err := st.UseNonces(ctx, []hookbox.Nonce{n})
			if err != nil {
				return false, err
			}
			return ok[0], nil
		},
	}))
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			ts.Close()
			rec.Close()
		}
	}
	t.Cleanup(stop)
	return &mailgunHarness{t: t, st: st, url: ts.URL}, stop
}

func (h *mailgunHarness) post(body []byte) (int, string) {
	h.t.Helper()
	return h.postTo("mailgun", body)
}

// postTo posts body to source: the harness has two, "mailgun" and
// "mailgun-b", on one signing key (a Mailgun account's key serves all its
// webhooks).
func (h *mailgunHarness) postTo(source string, body []byte) (int, string) {
	h.t.Helper()
	resp, err := http.Post(h.url+"/webhooks/"+source, "application/json", strings.NewReader(string(body)))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// deliveryIDs lists the delivery ids stored, sorted by the store's order.
func deliveryIDs(t *testing.T, st dbtest.Store) []string {
	t.Helper()
	es, err := st.Events(context.Background(), hookbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		ids = append(ids, e.DeliveryID)
	}
	return ids
}

// TestMailgunReplayRefused: Mailgun's signature covers its timestamp and
// token, not the event data, so a captured delivery's signature object
// could carry other event data within the tolerance. Over real HTTP and
// a real store: the genuine delivery is stored, and sent again it is a
// duplicate; its signature with other event data (a new event id, or the
// same id with other content) gets 401 and nothing is stored, also at a
// second server on the same database (another process: the token is
// remembered by the store) and at another source on the same key. Both refusals are logged, and a re-check never
// admits them.
func TestMailgunReplayRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const key = "mailgun-signing-key-replay"
		st := dbtest.Open(t, dbURL)
		h, stop := startMailgun(t, st, key)
		ts := time.Now().Unix()
		genuine := mailgunBody(key, "tok-genuine-0123456789", ts, `{"id":"mg-1","event":"delivered","recipient":"a@example.com"}`)
		for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
			if status, reply := h.post(genuine); status != http.StatusAccepted || !strings.Contains(reply, want) {
				t.Fatalf("genuine delivery, copy %d: %d %s", i+1, status, reply)
			}
		}
		forged := []byte(strings.Replace(string(genuine), `"id":"mg-1","event":"delivered"`, `"id":"mg-forged","event":"clicked"`, 1))
		sameID := []byte(strings.Replace(string(genuine), `a@example.com`, `b@example.com`, 1))
		for name, body := range map[string][]byte{"a new event id": forged, "the same id, other content": sameID} {
			if status, reply := h.post(body); status != http.StatusUnauthorized || !strings.Contains(reply, hookbox.ReplayReason) {
				t.Fatalf("signature replayed with %s: %d %s; want 401 saying it is a replay", name, status, reply)
			}
		}
		other, stopOther := startMailgun(t, st, key)
		if status, reply := other.post(forged); status != http.StatusUnauthorized {
			t.Fatalf("replay at a second server on the same database: %d %s", status, reply)
		}
		if status, reply := other.postTo("mailgun-b", forged); status != http.StatusUnauthorized {
			t.Fatalf("replay at another source with the same key: %d %s", status, reply)
		}
		stop()
		stopOther()
		if ids := deliveryIDs(t, st); len(ids) != 1 || ids[0] != "mg-1" {
			t.Fatalf("stored %v; want the genuine delivery only", ids)
		}
		rjs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 4 {
			t.Fatalf("%d rejections logged (%v); want the 4 replays", len(rjs), err)
		}
		for _, rj := range rjs {
			if rj.Status != http.StatusUnauthorized || rj.Reason != hookbox.ReplayReason {
				t.Fatalf("logged %d %q", rj.Status, rj.Reason)
			}
		}
		v, _ := verify.New(verify.Config{Scheme: verify.SchemeMailgun, Secrets: []string{key}})
		res, err := rejected.Recheck(context.Background(), st, map[string]rejected.Source{"mailgun": {Verifier: v}, "mailgun-b": {Verifier: v}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 || len(res.Refused) != 4 || res.Refused[0].Reason != rejected.ReasonReplayed {
			t.Fatalf("re-check of the replays: %+v", res)
		}
		if ids := deliveryIDs(t, st); len(ids) != 1 {
			t.Fatalf("after the re-check, stored %v", ids)
		}
	})
}

// TestRecheckJudgesNonces: deliveries refused under a wrong key are
// re-checked under the right one. Two that share a token with different
// event data are both refused (which was genuine cannot be told), in a dry
// run too; one whose token a stored delivery already used with another
// body is refused; a delivery with a token of its own is admitted, and its
// token is then remembered: the same token with other event data gets 401
// at ingest.
func TestRecheckJudgesNonces(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const key, wrong = "mailgun-right-key", "mailgun-wrong-key"
		st := dbtest.Open(t, dbURL)
		ts := time.Now().Unix()
		twinA := mailgunBody(key, "tok-twin", ts, `{"id":"mg-twin-a"}`)
		twinB := mailgunBody(key, "tok-twin", ts, `{"id":"mg-twin-b"}`)
		late := mailgunBody(key, "tok-late", ts, `{"id":"mg-late-forged"}`)
		own := mailgunBody(key, "tok-own", ts, `{"id":"mg-own"}`)

		misconfigured, stop := startMailgun(t, st, wrong)
		for _, b := range [][]byte{twinA, twinB, late, own} {
			if status, reply := misconfigured.post(b); status != http.StatusUnauthorized {
				t.Fatalf("under the wrong key: %d %s", status, reply)
			}
		}
		stop()
		fixed, stopFixed := startMailgun(t, st, key)
		if status, reply := fixed.post(mailgunBody(key, "tok-late", ts, `{"id":"mg-late"}`)); status != http.StatusAccepted {
			t.Fatalf("genuine delivery of tok-late: %d %s", status, reply)
		}

		v, _ := verify.New(verify.Config{Scheme: verify.SchemeMailgun, Secrets: []string{key}})
		sources := map[string]rejected.Source{"mailgun": {Verifier: v}}
		refused := func(res rejected.RecheckResult) map[string]int {
			n := map[string]int{}
			for _, r := range res.Refused {
				n[r.Reason]++
			}
			return n
		}
		dry, err := rejected.Recheck(context.Background(), st, sources, rejected.RecheckParams{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(dry.Admitted) != 2 || refused(dry)[rejected.ReasonReplayed] != 2 {
			t.Fatalf("dry run: %+v; want the twins refused, the others passing (a dry run does not ask the store)", dry)
		}
		res, err := rejected.Recheck(context.Background(), st, sources, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 1 || refused(res)[rejected.ReasonReplayed] != 3 {
			t.Fatalf("re-check: %+v; want mg-own admitted, the twins and the late forgery refused as replays", res)
		}
		ids := deliveryIDs(t, st)
		if len(ids) != 2 || !(ids[0] == "mg-own" && ids[1] == "mg-late" || ids[0] == "mg-late" && ids[1] == "mg-own") {
			t.Fatalf("stored %v; want mg-late and mg-own", ids)
		}
		if status, reply := fixed.post(mailgunBody(key, "tok-own", ts, `{"id":"mg-own-forged"}`)); status != http.StatusUnauthorized {
			t.Fatalf("tok-own with other event data after the re-check admitted it: %d %s", status, reply)
		}
		stopFixed()
	})
}

// TestRecheckTokenWindow: a re-check admits a delivery whose signature
// carries a token only while that signature is within its tolerance, and
// never one whose token came with another body anywhere in the log. A
// forgery logged by a process that had the wrong key is refused as a
// replay within the tolerance (the store remembers the genuine delivery's
// token) and as expired after it; two logged deliveries sharing a token
// are refused, even when one is named alone. Nothing forged is stored.
func TestRecheckTokenWindow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const key, wrong = "mailgun-right-key", "mailgun-old-key"
		st := dbtest.Open(t, dbURL)
		now := time.Now()
		ts := now.Unix()
		fixed, stopFixed := startMailgun(t, st, key)
		if status, reply := fixed.post(mailgunBody(key, "tok-g", ts, `{"id":"mg-g"}`)); status != http.StatusAccepted {
			t.Fatalf("genuine delivery: %d %s", status, reply)
		}
		stopFixed()
		old, stopOld := startMailgun(t, st, wrong)
		for _, b := range [][]byte{
			mailgunBody(key, "tok-g", ts, `{"id":"mg-g-forged"}`),
			mailgunBody(key, "tok-c", ts, `{"id":"mg-c"}`),
			mailgunBody(key, "tok-c", ts, `{"id":"mg-c-forged"}`),
		} {
			if status, reply := old.post(b); status != http.StatusUnauthorized {
				t.Fatalf("under the old key: %d %s", status, reply)
			}
		}
		stopOld()
		rjs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 3 {
			t.Fatalf("%d rejections, %v", len(rjs), err)
		}
		var genuineC int64
		for _, rj := range rjs {
			if strings.Contains(string(rj.Body), `"mg-c"`) {
				genuineC = rj.ID
			}
		}
		v, _ := verify.New(verify.Config{Scheme: verify.SchemeMailgun, Secrets: []string{key}})
		sources := map[string]rejected.Source{"mailgun": {Verifier: v}}
		res, err := rejected.Recheck(context.Background(), st, sources, rejected.RecheckParams{IDs: []int64{genuineC}, Now: now})
		if err != nil || len(res.Admitted) != 0 || len(res.Refused) != 1 || res.Refused[0].Reason != rejected.ReasonReplayed {
			t.Fatalf("re-check of mg-c by id, its twin in the log: %+v, %v; want it refused as a replay", res, err)
		}
		reasons := func(at time.Time) map[string]int {
			t.Helper()
			res, err := rejected.Recheck(context.Background(), st, sources, rejected.RecheckParams{Now: at})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Admitted) != 0 {
				t.Fatalf("re-check at %v admitted %+v", at, res.Admitted)
			}
			n := map[string]int{}
			for _, r := range res.Refused {
				n[r.Reason]++
			}
			return n
		}
		if n := reasons(time.Unix(ts, 0).Add(verify.DefaultTolerance + time.Second)); n[rejected.ReasonTokenExpired] != 1 || n[rejected.ReasonReplayed] != 2 {
			t.Fatalf("re-check after the tolerance: %v; want the forgery refused as expired, the twins as replays", n)
		}
		if n := reasons(now); n[rejected.ReasonReplayed] != 3 {
			t.Fatalf("re-check within the tolerance: %v; want all three refused as replays", n)
		}
		if ids := deliveryIDs(t, st); len(ids) != 1 || ids[0] != "mg-g" {
			t.Fatalf("stored %v; want mg-g alone", ids)
		}
	})
}

// TestNonceKeepCoversTolerance: the store remembers a nonce longer than
// any signature carrying it is accepted, with a margin for late bodies
// and clocks that differ.
func TestNonceKeepCoversTolerance(t *testing.T) {
	if hookbox.NonceKeep < verify.MaxNonceTolerance+5*time.Minute {
		t.Fatalf("NonceKeep %v, MaxNonceTolerance %v: nonces would be forgotten while their signatures are accepted", hookbox.NonceKeep, verify.MaxNonceTolerance)
	}
}
