package routing_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/verify"
)

// TestNullKeyIsNotHeld: with order_by data.customer, a delivery whose
// customer is null that goes dead (max_attempts 1, on_dead holding the
// key by default) does not hold a later delivery whose customer is null
// too: neither has the value, so each waits for no other.
func TestNullKeyIsNotHeld(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("secret-of-the-routing-e2e-test"))
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"id":"evt_1"`) {
				http.Error(w, "refused", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(app.Close)
		srv := e2e.Start(t, fmt.Sprintf(`
sources:
  - name: stripe
    scheme: standard-webhooks
    secrets: [%q]
    max_attempts: 1
    targets:
      - name: billing
        forward: %s
        order_by: data.customer
`, secret, app.URL), dbURL, nil)
		status := func(id int64) hookbox.Status {
			t.Helper()
			e, err := srv.Svc.Store.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return e.Status
		}
		first := srv.Send("stripe", "evt_1", []byte(`{"type":"payment_intent.succeeded","id":"evt_1","data":{"customer":null}}`)).ID
		srv.WaitIdle(30 * time.Second)
		if s := status(first); s != hookbox.StatusDead {
			t.Fatalf("the first event is %s, want dead", s)
		}
		second := srv.Send("stripe", "evt_2", []byte(`{"type":"payment_intent.succeeded","id":"evt_2","data":{"customer":null}}`)).ID
		srv.WaitIdle(30 * time.Second)
		if s := status(second); s != hookbox.StatusDone {
			t.Errorf("the second event is %s, want done", s)
		}
		keys := map[string]int64{}
		for _, e := range srv.Events("stripe") {
			if e.Parent == 0 {
				continue
			}
			if other, ok := keys[e.OrderKey]; ok {
				t.Errorf("deliveries %d and %d share the order key %q", other, e.ID, e.OrderKey)
			}
			keys[e.OrderKey] = e.ID
		}
	})
}

// hostileKeys are order_by values a verified sender may choose to hurt
// the store or an operator: longer than any index entry PostgreSQL takes
// (2704 bytes; random text does not compress under it), a megabyte, a
// NUL, terminal controls (C0 and C1), a number of 5,000 digits, and a
// value forged to look like a hashed key. Each is a JSON string at
// data.customer except the number.
func hostileKeys() map[string]string {
	random := make([]byte, 1500)
	rand.Read(random)
	return map[string]string{
		"random-3000": `"` + hex.EncodeToString(random) + `"`,
		"megabyte":    `"` + strings.Repeat("a", 1<<20-300) + `"`,
		"nul":         `"cus_\u0000x"`,
		"controls":    `"cus_\u001b]0;owned\u0007\u009b2J\u0085"`,
		"digits":      strings.Repeat("7", 5000),
		"forged":      `"sha256:` + strings.Repeat("0", 64) + `"`,
	}
}

// checkStoredKey fails t unless key is one hookbox stores: at most
// hookbox.MaxOrderKeyLength bytes of UTF-8 text with no NUL and no control
// character.
func checkStoredKey(t *testing.T, what, key string) {
	t.Helper()
	if !hookbox.StorableOrderKey(key) || hookbox.NotReceivable(key, false) != "" {
		t.Errorf("%s: stored order key %.80q (%d bytes), want at most %d bytes of text without controls", what, key, len(key), hookbox.MaxOrderKeyLength)
	}
}

// TestHostileKeysDoNotFailTheirBatch: verified deliveries whose order_by
// values are hostile (hostileKeys, and a header key of 8,000 random
// characters or of Latin-1 bytes) arrive at once with ordinary ones and
// are committed in one group commit (flushers: 1 with a batch_wait that
// holds the batch open until all have arrived): every one is answered 202
// and stored, each delivery with a bounded, storable key, and the
// ordinary ones keep their keys as sent. A key PostgreSQL's index refused
// would fail the statement of the whole batch, and a sender could then
// make every delivery sharing its commit fail.
func TestHostileKeysDoNotFailTheirBatch(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("secret-of-the-hostile-key-test"))
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		type delivery struct {
			id, body string
			header   http.Header
		}
		var ds []delivery
		for name, v := range hostileKeys() {
			ds = append(ds, delivery{id: "evil_" + name, body: `{"id":"evil_` + name + `","data":{"customer":` + v + `}}`})
		}
		random := make([]byte, 4000)
		rand.Read(random)
		ds = append(ds,
			delivery{id: "evil_header", body: `{"id":"evil_header","data":{}}`, header: http.Header{"X-Customer": {hex.EncodeToString(random)}}},
			delivery{id: "evil_latin1", body: `{"id":"evil_latin1","data":{}}`, header: http.Header{"X-Customer": {"caf\xe9"}}})
		const ordinary = 6
		for i := range ordinary {
			id := fmt.Sprintf("ok_%d", i)
			ds = append(ds, delivery{id: id, body: `{"id":"` + id + `","data":{"customer":"cus_` + id + `"}}`,
				header: http.Header{"X-Customer": {"cus_" + id}}})
		}
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(app.Close)
		srv := e2e.Start(t, fmt.Sprintf(`
max_body_bytes: 2097152
ingest:
  flushers: 1
  batch_max: %d
  batch_wait: 7s
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: [%q]
    targets:
      - name: billing
        forward: %[3]s
        order_by: data.customer
      - name: mail
        forward: %[3]s
        order_by: header:X-Customer
`, len(ds), secret, app.URL), dbURL, nil)
		vc := srv.Source("shop").Verify()
		replies := make([]int, len(ds))
		var wg sync.WaitGroup
		for i, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := verify.Sign(vc, []byte(d.body), d.id, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/shop", strings.NewReader(d.body))
				maps.Copy(req.Header, h)
				maps.Copy(req.Header, d.header)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				replies[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		for i, d := range ds {
			if replies[i] != http.StatusAccepted {
				t.Errorf("delivery %s: answered %d, want 202", d.id, replies[i])
			}
		}
		t.Logf("group commits: %s", batchSizes(t, srv.URL))
		stored := 0
		for _, e := range srv.Events("shop") {
			if e.Parent == 0 {
				continue
			}
			stored++
			checkStoredKey(t, e.DeliveryID+" to "+e.Target, e.OrderKey)
			if strings.HasPrefix(e.DeliveryID, "ok_") && e.OrderKey != "cus_"+e.DeliveryID {
				t.Errorf("ordinary delivery %s to %s stored with the key %q, want %q", e.DeliveryID, e.Target, e.OrderKey, "cus_"+e.DeliveryID)
			}
		}
		if stored != 2*len(ds) {
			t.Errorf("%d deliveries stored, want %d", stored, 2*len(ds))
		}
	})
}

// batchSizes returns the count and sum of hookbox_ingest_batch_size from
// the /metrics of the service at url, for a test's log.
func batchSizes(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "hookbox_ingest_batch_size_count") || strings.HasPrefix(l, "hookbox_ingest_batch_size_sum") {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// TestKeyControlsNeverReachTheLog: an order_by value holding terminal
// controls (ESC and BEL of a title-setting sequence, the C1 CSI and NEL)
// in a verified delivery's JSON body or header is stored hashed, like a
// value a store cannot hold, so the "event dead" line that names the key
// carries none of them. slog's JSON handler escapes C0 characters but
// writes C1 ones as they are, and a terminal showing the log may obey
// them; the key was stored and logged as sent.
func TestKeyControlsNeverReachTheLog(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("secret-of-the-key-controls-test"))
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "refused", http.StatusInternalServerError)
		}))
		t.Cleanup(app.Close)
		var logs syncbuf.Buffer
		srv := e2e.StartLogged(t, fmt.Sprintf(`
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: [%q]
    max_attempts: 1
    targets:
      - name: billing
        forward: %[2]s
        order_by: data.customer
      - name: mail
        forward: %[2]s
        order_by: header:X-Customer
`, secret, app.URL), dbURL, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
		body := []byte(`{"id":"evt_1","data":{"customer":"cus_\u001b]0;owned\u0007\u009b2J\u0085"}}`)
		h, err := verify.Sign(srv.Source("shop").Verify(), body, "evt_1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		h.Set("X-Customer", "cus_\u009b2J\u0085")
		if r := srv.Post("shop", h, body); r.Status != http.StatusAccepted {
			t.Fatalf("delivery answered %+v, want 202", r)
		}
		// The line is written once the outcome is recorded: await it.
		var dead []string
		for deadline := time.Now().Add(30 * time.Second); len(dead) < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d event dead lines, want 2:\n%s", len(dead), logs.String())
			}
			dead = dead[:0]
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, `"msg":"event dead"`) {
					dead = append(dead, l)
				}
			}
		}
		for _, l := range dead {
			if i := strings.IndexFunc(l, unicode.IsControl); i >= 0 {
				t.Errorf("the dead line holds the control %U: %s", []rune(l[i:])[0], l)
			}
		}
		for _, e := range srv.Events("shop") {
			if e.Parent != 0 {
				checkStoredKey(t, e.Target, e.OrderKey)
			}
		}
	})
}
