package service_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

const testConfig = `
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g="]
  - name: stripe
    scheme: stripe
    secrets: ["whsec_stripe_test"]
  - name: github
    scheme: github
    secrets: ["gh-secret"]
  - name: shop
    scheme: hmac
    header: X-Shopify-Hmac-Sha256
    encoding: base64
    id_header: X-Shopify-Webhook-Id
    secrets: ["shop-secret"]
  - name: small
    scheme: none
    max_body_bytes: 64
`

// harness is one running hookbox on a real port over a real database.
type harness struct {
	t     testing.TB
	url   string
	svc   *service.Service
	cfg   *config.Config
	dbURL string
}

// forEachDB runs fn as a "sqlite" and a "postgres" subtest.
func forEachDB(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite:"+filepath.Join(t.TempDir(), "hookbox.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.URL(t))
	})
}

func start(t *testing.T, dbURL string) *harness {
	t.Helper()
	return startWith(t, dbURL, testConfig)
}

// startWith is start with another config document.
func startWith(t testing.TB, dbURL, doc string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = dbURL
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	addr, done := serve(t, ctx, svc)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &harness{t: t, url: "http://" + addr, svc: svc, cfg: cfg, dbURL: dbURL}
}

// serve runs svc on a port of its own until ctx ends, and returns its
// address and what Serve returns.
func serve(t testing.TB, ctx context.Context, svc *service.Service) (addr string, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, ln) }()
	return ln.Addr().String(), served
}

func (h *harness) source(name string) config.Source {
	for _, s := range h.cfg.Sources {
		if s.Name == name {
			return s
		}
	}
	h.t.Fatalf("no source %s", name)
	return config.Source{}
}

// signed builds a request signed as the source's provider would.
func (h *harness) signed(source, deliveryID string, body []byte) *http.Request {
	h.t.Helper()
	hdr, err := verify.Sign(h.source(source).Verify(), body, deliveryID, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, h.url+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

type reply struct {
	status    int
	ID        int64  `json:"id"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
	header    http.Header
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %d is not JSON: %q", resp.StatusCode, b)
	}
	return r
}

func (h *harness) count(f hookbox.Filter) int {
	h.t.Helper()
	f.Limit = 1 << 30
	es, err := h.svc.Store.Events(context.Background(), f)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(es)
}

func TestReceiveNewThenDuplicate(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := start(t, dbURL)
		body := []byte(`{"type":"order.paid","data":{"id":"ord_1"}}`)
		first := do(t, h.signed("polar", "msg_1", body))
		if first.status != http.StatusAccepted || first.Duplicate || first.ID == 0 {
			t.Fatalf("first delivery: %+v", first)
		}
		again := do(t, h.signed("polar", "msg_1", body))
		if again.status != http.StatusAccepted || !again.Duplicate || again.ID != first.ID {
			t.Fatalf("redelivery: %+v, want 202 duplicate of %d", again, first.ID)
		}
		e, err := h.svc.Store.Event(context.Background(), first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Payload, body) || e.EventType != "order.paid" || e.DeliveryID != "msg_1" {
			t.Errorf("stored event = %+v payload %q", e, e.Payload)
		}
		if e.Header.Get("Webhook-Signature") == "" {
			t.Errorf("signature header not kept for forwarding: %v", e.Header)
		}
	})
}

// TestConcurrentCopiesOneRow is the headline of invariant 2: 100 copies of
// one delivery at once give one row, 100 answers of 202, one of them new.
func TestConcurrentCopiesOneRow(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := start(t, dbURL)
		const copies = 100
		body := []byte(`{"id":"evt_same","type":"invoice.paid"}`)
		reqs := make([]*http.Request, copies)
		for i := range reqs {
			reqs[i] = h.signed("stripe", "", body)
		}
		replies := make([]reply, copies)
		var wg sync.WaitGroup
		startGate := make(chan struct{})
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startGate
				replies[i] = do(t, reqs[i])
			}()
		}
		close(startGate)
		wg.Wait()
		news := 0
		for i, r := range replies {
			if r.status != http.StatusAccepted {
				t.Fatalf("copy %d: %+v", i, r)
			}
			if !r.Duplicate {
				news++
			}
			if r.ID != replies[0].ID {
				t.Errorf("copy %d id %d, copy 0 id %d", i, r.ID, replies[0].ID)
			}
		}
		if news != 1 {
			t.Errorf("%d replies said duplicate:false, want exactly 1", news)
		}
		if n := h.count(hookbox.Filter{Source: "stripe"}); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})
}

// TestBadInputStoresNothing: each kind of bad request gets its status and
// leaves the table empty.
func TestBadInputStoresNothing(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := start(t, dbURL)
		body := []byte(`{"type":"x"}`)
		tampered := h.signed("polar", "m1", body)
		tampered.Body = io.NopCloser(strings.NewReader(`{"type":"y"}`))
		tampered.ContentLength = int64(len(`{"type":"y"}`))
		unsigned := h.signed("github", "g1", body)
		unsigned.Header.Del("X-Hub-Signature-256")
		noID := h.signed("stripe", "", []byte(`{"type":"invoice.paid"}`))
		notJSON := h.signed("stripe", "", []byte(`not json`))
		get, _ := http.NewRequest(http.MethodGet, h.url+"/webhooks/polar", nil)
		unknown, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/nope", strings.NewReader("{}"))
		big, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/small", strings.NewReader(strings.Repeat("x", 65)))
		bigChunked, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/small", io.MultiReader(strings.NewReader(strings.Repeat("y", 100))))
		bigChunked.ContentLength = -1
		cases := []struct {
			name string
			req  *http.Request
			want int
		}{
			{"tampered body", tampered, http.StatusUnauthorized},
			{"missing signature", unsigned, http.StatusUnauthorized},
			{"stripe body without id", noID, http.StatusBadRequest},
			{"stripe body not JSON", notJSON, http.StatusBadRequest},
			{"wrong method", get, http.StatusMethodNotAllowed},
			{"unknown source", unknown, http.StatusNotFound},
			{"too large", big, http.StatusRequestEntityTooLarge},
			{"too large, chunked", bigChunked, http.StatusRequestEntityTooLarge},
		}
		for _, c := range cases {
			r := do(t, c.req)
			if r.status != c.want {
				t.Errorf("%s: status %d (%q), want %d", c.name, r.status, r.Error, c.want)
			}
			if r.Error == "" {
				t.Errorf("%s: reply says nothing about what is wrong", c.name)
			}
			for _, secret := range []string{"whsec_dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g=", "gh-secret", "whsec_stripe_test"} {
				if strings.Contains(r.Error, secret) {
					t.Errorf("%s: reply leaks a secret", c.name)
				}
			}
		}
		if n := h.count(hookbox.Filter{}); n != 0 {
			t.Errorf("bad input stored %d rows", n)
		}
	})
}

func TestEverySchemeAccepted(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := start(t, dbURL)
		for _, c := range []struct{ source, id string }{
			{"polar", "msg_x"}, {"stripe", ""}, {"github", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, {"shop", "shop-1"}, {"small", ""},
		} {
			r := do(t, h.signed(c.source, c.id, []byte(`{"id":"evt_1","type":"t"}`)))
			if r.status != http.StatusAccepted || r.Duplicate {
				t.Errorf("%s: %+v", c.source, r)
			}
		}
		if n := h.count(hookbox.Filter{}); n != 5 {
			t.Errorf("rows = %d, want 5", n)
		}
		es, _ := h.svc.Store.Events(context.Background(), hookbox.Filter{Source: "small"})
		if len(es) != 1 || !es[0].IDIsHash {
			t.Errorf("source without ids must key on the body hash: %+v", es)
		}
	})
}

func TestHealth(t *testing.T) {
	h := start(t, "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d", path, resp.StatusCode)
		}
	}
}

// TestSQLiteCannotCommit: the file refuses writes (a trigger aborts every
// insert, as a full disk would); the answer is 503 with Retry-After.
func TestSQLiteCannotCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.db")
	h := start(t, "sqlite:"+path)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)") // waits for the store's writes
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(t, h.url); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s before any commit failed", code, body)
	}
	r := do(t, h.signed("polar", "m-full", []byte(`{}`)))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("reply %+v, want 503 with Retry-After", r)
	}
	// The store still answers a ping, but /readyz says it cannot commit.
	if code, body := readyz(t, h.url); code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot commit") {
		t.Errorf("/readyz = %d %s while commits fail, want 503 saying the store cannot commit", code, body)
	}
	if _, err := db.Exec(`DROP TRIGGER refuse`); err != nil {
		t.Fatal(err)
	}
	if r := do(t, h.signed("polar", "m-full", []byte(`{}`))); r.status != http.StatusAccepted || r.Duplicate {
		t.Fatalf("after the disk recovered: %+v, want 202 new", r)
	}
	// A failed check is answered again for a second (server.readyCache).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := readyz(t, h.url)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %s 10 s after a commit succeeded again, want 200", code, body)
		}
	}
}

// readyz returns the status and body of GET /readyz.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClosedStore503: a closed database answers 503, never 202.
func TestClosedStore503(t *testing.T) {
	forEachDB(t, func(t *testing.T, dbURL string) {
		h := start(t, dbURL)
		h.svc.Store.Close()
		r := do(t, h.signed("polar", "m-closed", []byte(`{}`)))
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("reply %+v, want 503", r)
		}
		resp, err := http.Get(h.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/readyz = %d with a closed store, want 503", resp.StatusCode)
		}
	})
}

// TestPostgresStopped puts a TCP proxy between hookbox and PostgreSQL and
// cuts it, as a stopped server would: every answer is 503; when the proxy
// returns, ingest resumes without a restart.
func TestPostgresStopped(t *testing.T) {
	url := pgtest.URL(t)
	p, viaProxy := faults.URLProxyFor(t, url)
	h := start(t, viaProxy)
	if r := do(t, h.signed("polar", "before", []byte(`{}`))); r.status != http.StatusAccepted {
		t.Fatalf("before the outage: %+v", r)
	}
	p.Cut()
	for i := range 5 {
		if r := do(t, h.signed("polar", fmt.Sprint("during-", i), []byte(`{}`))); r.status != http.StatusServiceUnavailable {
			t.Fatalf("during the outage: %+v, want 503", r)
		}
	}
	p.Restore()
	if r := do(t, h.signed("polar", "after", []byte(`{}`))); r.status != http.StatusAccepted || r.Duplicate {
		t.Fatalf("after the outage: %+v, want 202 new", r)
	}
}
