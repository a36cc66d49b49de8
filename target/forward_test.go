package target_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// received is one request as the sink saw it.
type received struct {
	at     time.Time
	header http.Header
	body   []byte
	remote string
}

// sink is a real HTTP server on 127.0.0.1 that records what it receives
// and answers with reply(n, r), n counting requests from 1.
type sink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []received
	reply func(n int, r *http.Request, w http.ResponseWriter)
}

func newSink(t *testing.T, reply func(n int, r *http.Request, w http.ResponseWriter)) *sink {
	t.Helper()
	s := &sink{reply: reply}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, received{at: at, header: r.Header.Clone(), body: body, remote: r.RemoteAddr})
		n := len(s.reqs)
		s.mu.Unlock()
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		s.reply(n, r, w)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

func newForward(t *testing.T, opts target.ForwardOptions) *target.Forward {
	t.Helper()
	f, err := target.NewForward(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func status(code int, body string) func(int, *http.Request, http.ResponseWriter) {
	return func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

const (
	swSecret     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stripeSecret = "whsec_test_forward_stripe_secret"
	sharedSecret = "s3cret-shared-value-42"
)

// TestForwardKeepsSignatures stores deliveries signed as Standard Webhooks
// and Stripe sign them, forwards them, and has the app re-verify the
// original signatures with the providers' own libraries over what arrived.
func TestForwardKeepsSignatures(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		verifyErrs []string
		app        *sink
	)
	// The app verifies the provider's signature over the bytes it got.
	app = newSink(t, func(n int, r *http.Request, w http.ResponseWriter) {
		got := app.requests()[n-1]
		var err error
		switch r.Header.Get(target.HeaderSource) {
		case "polar":
			err = wh.Verify(got.body, got.header)
		case "stripe":
			err = webhook.ValidatePayload(got.body, got.header.Get("Stripe-Signature"), stripeSecret)
		default:
			err = errors.New("unknown source")
		}
		if err != nil {
			mu.Lock()
			verifyErrs = append(verifyErrs, fmt.Sprintf("%s: %v", r.Header.Get(target.HeaderSource), err))
			mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	f := newForward(t, target.ForwardOptions{
		URL:     app.srv.URL + "/hooks?x=1",
		Headers: map[string]string{"X-Shared-Secret": sharedSecret},
	})
	rg := newRig(t, map[string]worker.Target{"polar": f, "stripe": f}, quick)

	// Bodies a re-encoder would change: spacing, key order, escapes, a
	// trailing newline.
	swBody := []byte("{ \"type\":\"order.paid\",  \"data\": {\"name\":\"Zo\\u00e9 \u00e9\", \"n\": 1.50e2}}\n")
	stripeBody := []byte("{\n  \"id\": \"evt_1Pq2Rs\",\n  \"object\": \"event\",\n  \"type\": \"invoice.paid\",\n  \"data\": {\"amount\": 1e3 }\n}")
	now := time.Now()
	swHdr, err := verify.Sign(verify.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}}, swBody, "msg_2abcDEF", now)
	if err != nil {
		t.Fatal(err)
	}
	stripeHdr, err := verify.Sign(verify.Config{Scheme: "stripe", Secrets: []string{stripeSecret}}, stripeBody, "", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []http.Header{swHdr, stripeHdr} {
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("User-Agent", "Provider-Hookshot/1.0")
		// Headers that must not be forwarded as stored, or overridden.
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Content-Length", "99999")
		h.Set("Idempotency-Key", "spoofed")
		h.Set("Hookbox-Source", "spoofed")
	}
	ids := rg.ingest(
		hookbox.Delivery{Source: "polar", DeliveryID: "msg_2abcDEF", EventType: "order.paid", Header: swHdr, Payload: swBody},
		hookbox.Delivery{Source: "stripe", DeliveryID: "evt_1Pq2Rs", EventType: "invoice.paid", Header: stripeHdr, Payload: stripeBody},
	)
	rg.want(ids[0], hookbox.StatusDone, 1)
	rg.want(ids[1], hookbox.StatusDone, 1)
	mu.Lock()
	if len(verifyErrs) > 0 {
		t.Errorf("the app could not verify the forwarded deliveries: %v", verifyErrs)
	}
	mu.Unlock()

	reqs := app.requests()
	if len(reqs) != 2 {
		t.Fatalf("app got %d requests, want 2", len(reqs))
	}
	for _, want := range []struct {
		source, delivery string
		id               int64
		body             []byte
		sigHeader        string
	}{
		{"polar", "msg_2abcDEF", ids[0], swBody, "Webhook-Signature"},
		{"stripe", "evt_1Pq2Rs", ids[1], stripeBody, "Stripe-Signature"},
	} {
		var got *received
		for i := range reqs {
			if reqs[i].header.Get(target.HeaderSource) == want.source {
				got = &reqs[i]
			}
		}
		if got == nil {
			t.Fatalf("no request for %s", want.source)
		}
		if !bytes.Equal(got.body, want.body) {
			t.Errorf("%s: body\n%q\nwant byte-identical\n%q", want.source, got.body, want.body)
		}
		h := got.header
		checks := map[string]string{
			"Idempotency-Key":  want.source + ":" + want.delivery,
			"Hookbox-Event-Id": strconv.FormatInt(want.id, 10),
			"Hookbox-Attempt":  "1",
			"Hookbox-Source":   want.source,
			"Content-Type":     "application/json; charset=utf-8",
			"User-Agent":       "Provider-Hookshot/1.0",
			"X-Shared-Secret":  sharedSecret,
			"Content-Length":   strconv.Itoa(len(want.body)),
			"Keep-Alive":       "",
			want.sigHeader:     map[bool]string{true: swHdr.Get("Webhook-Signature"), false: stripeHdr.Get("Stripe-Signature")}[want.source == "polar"],
		}
		for k, v := range checks {
			if h.Get(k) != v {
				t.Errorf("%s: header %s = %q, want %q", want.source, k, h.Get(k), v)
			}
		}
		if vs := h.Values("Idempotency-Key"); len(vs) != 1 {
			t.Errorf("%s: Idempotency-Key sent %d times: %q", want.source, len(vs), vs)
		}
	}
	// The original id and timestamp headers went along too.
	for _, r := range reqs {
		if r.header.Get(target.HeaderSource) == "polar" {
			if r.header.Get("Webhook-Id") != "msg_2abcDEF" || r.header.Get("Webhook-Timestamp") != swHdr.Get("Webhook-Timestamp") {
				t.Errorf("standard-webhooks id/timestamp headers not forwarded: %v", r.header)
			}
		}
	}
}

// TestForwardRetriesThenDone: 500, 429, 408 and a plain 404 are all retried
// with backoff, with the same Idempotency-Key, until a 2xx.
func TestForwardRetriesThenDone(t *testing.T) {
	app := newSink(t, func(n int, r *http.Request, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "boom\n\tat handler.go:12")
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
		case 3:
			w.WriteHeader(http.StatusRequestTimeout)
		case 4:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "no route")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	rg := newRig(t, map[string]worker.Target{"shop": newForward(t, target.ForwardOptions{URL: app.srv.URL})}, quick)
	ids := rg.ingest(hookbox.Delivery{Source: "shop", DeliveryID: "d-1", Header: http.Header{"Content-Type": {"application/json"}}, Payload: []byte(`{"a":1}`)})
	rg.want(ids[0], hookbox.StatusDone, 5)

	wantErrs := []string{
		"forward: 500 Internal Server Error: boom at handler.go:12",
		"forward: 429 Too Many Requests",
		"forward: 408 Request Timeout",
		"forward: 404 Not Found: no route",
		"",
	}
	as := rg.attempts(ids[0])
	if len(as) != len(wantErrs) {
		t.Fatalf("%d attempts recorded, want %d: %+v", len(as), len(wantErrs), as)
	}
	for i, a := range as {
		wantOutcome := hookbox.AttemptRetry
		if i == len(as)-1 {
			wantOutcome = hookbox.AttemptDone
		}
		if a.Outcome != wantOutcome || a.Error != wantErrs[i] {
			t.Errorf("attempt %d: %s %q, want %s %q", i+1, a.Outcome, a.Error, wantOutcome, wantErrs[i])
		}
	}
	for i, r := range app.requests() {
		if got := r.header.Get("Idempotency-Key"); got != "shop:d-1" {
			t.Errorf("request %d: Idempotency-Key %q, want shop:d-1", i+1, got)
		}
		if got := r.header.Get("Hookbox-Attempt"); got != strconv.Itoa(i+1) {
			t.Errorf("request %d: Hookbox-Attempt %q", i+1, got)
		}
	}
}

// TestForwardDeadAfterMaxAttempts: a reply that never succeeds makes the
// event dead after the policy's attempts, and the stored error never shows
// the configured secret even when the app echoes it.
func TestForwardDeadAfterMaxAttempts(t *testing.T) {
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "down for maintenance; you sent "+r.Header.Get("X-Api-Key")+" "+strings.Repeat("x", 500))
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{"X-Api-Key": sharedSecret}})
	pol := quick
	pol.MaxAttempts = 3
	rg := newRig(t, map[string]worker.Target{"s": f}, pol)
	ids := rg.ingest(hookbox.Delivery{Source: "s", DeliveryID: "d-dead", Payload: []byte(`{}`)})
	e := rg.want(ids[0], hookbox.StatusDead, 3)
	if !strings.HasPrefix(e.LastError, "forward: 503 Service Unavailable: down for maintenance; you sent [REDACTED] xxx") {
		t.Errorf("last error %q", e.LastError)
	}
	if strings.Contains(e.LastError, sharedSecret) {
		t.Errorf("last error leaks the header secret: %q", e.LastError)
	}
	if body := strings.TrimPrefix(e.LastError, "forward: 503 Service Unavailable: "); len(body) != 200 {
		t.Errorf("error carries %d bytes of body, want the first 200", len(body))
	}
	if n := len(app.requests()); n != 3 {
		t.Errorf("app got %d requests, want 3", n)
	}
}

// TestForwardReplyRedacted: a reply that echoes configured secrets (here
// the admin token and a webhook secret's base64 key) leaves none of them
// in the stored error, even when one straddles the 200-byte cut.
func TestForwardReplyRedacted(t *testing.T) {
	const token = "adm-secret-token-1"
	const whsec = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "token "+token+" key c2VjcmV0LXNlY3JldC1zZWNyZXQ= "+strings.Repeat("x", 160)+token)
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Redactor: redact.New(token, whsec)})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, leak := range []string{token, "c2VjcmV0LXNlY3JldC1zZWNyZXQ", token[:5]} {
		if strings.Contains(msg, leak) {
			t.Errorf("error holds %q: %s", leak, msg)
		}
	}
	if !strings.HasPrefix(msg, "forward: 500 Internal Server Error: token [REDACTED] key [REDACTED]") {
		t.Errorf("error %q", msg)
	}
}

// TestForwardPermanentStatus: 410 (default) and a configured status are
// dead at once, after one attempt.
func TestForwardPermanentStatus(t *testing.T) {
	gone := newSink(t, status(http.StatusGone, "endpoint removed"))
	unproc := newSink(t, status(http.StatusUnprocessableEntity, "bad payload"))
	rg := newRig(t, map[string]worker.Target{
		"gone":   newForward(t, target.ForwardOptions{URL: gone.srv.URL}),
		"unproc": newForward(t, target.ForwardOptions{URL: unproc.srv.URL, PermanentStatuses: []int{410, 422}}),
	}, quick)
	ids := rg.ingest(
		hookbox.Delivery{Source: "gone", DeliveryID: "1", Payload: []byte(`{}`)},
		hookbox.Delivery{Source: "unproc", DeliveryID: "1", Payload: []byte(`{}`)},
	)
	e := rg.want(ids[0], hookbox.StatusDead, 1)
	if e.LastError != "forward: 410 Gone: endpoint removed" {
		t.Errorf("last error %q", e.LastError)
	}
	rg.want(ids[1], hookbox.StatusDead, 1)
	if len(gone.requests()) != 1 || len(unproc.requests()) != 1 {
		t.Errorf("requests: gone %d, unproc %d; want 1 each", len(gone.requests()), len(unproc.requests()))
	}
}

// TestForwardRetryAfter: a Retry-After in seconds and one as an HTTP date
// each hold the next attempt back at least that long, although the policy
// would retry within milliseconds.
func TestForwardRetryAfter(t *testing.T) {
	app := newSink(t, func(n int, r *http.Request, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	pol := worker.Policy{MaxAttempts: 5, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Second, Timeout: 5 * time.Second}
	rg := newRig(t, map[string]worker.Target{"s": newForward(t, target.ForwardOptions{URL: app.srv.URL})}, pol)
	ids := rg.ingest(hookbox.Delivery{Source: "s", DeliveryID: "ra", Payload: []byte(`{}`)})
	rg.want(ids[0], hookbox.StatusDone, 3)
	reqs := app.requests()
	// Seconds: at least 1s. The date has one-second resolution, 2s ahead:
	// at least 1s.
	for i, min := range []time.Duration{time.Second, time.Second} {
		if gap := reqs[i+1].at.Sub(reqs[i].at); gap < min-10*time.Millisecond {
			t.Errorf("attempt %d came %v after attempt %d, want at least %v (Retry-After)", i+2, gap, i+1, min)
		}
	}
}

// TestForwardNoReply: a refused connection and an attempt that outlives
// its timeout are both retried; errors never quote the URL's query.
func TestForwardNoReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String() + "/hook?token=url-secret-token"
	ln.Close()

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := newSink(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if n == 1 {
			select { // outlive the attempt's timeout
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	pol := quick
	pol.MaxAttempts = 2
	pol.Timeout = 300 * time.Millisecond
	rg := newRig(t, map[string]worker.Target{
		"refused": newForward(t, target.ForwardOptions{URL: closedURL}),
		"slow":    newForward(t, target.ForwardOptions{URL: slow.srv.URL + "/?token=url-secret-token"}),
	}, pol)
	ids := rg.ingest(
		hookbox.Delivery{Source: "refused", DeliveryID: "1", Payload: []byte(`{}`)},
		hookbox.Delivery{Source: "slow", DeliveryID: "1", Payload: []byte(`{}`)},
	)
	e := rg.want(ids[0], hookbox.StatusDead, 2)
	if !strings.HasPrefix(e.LastError, "forward: ") || !strings.Contains(e.LastError, "connection refused") {
		t.Errorf("refused: last error %q", e.LastError)
	}
	rg.want(ids[1], hookbox.StatusDone, 2)
	as := rg.attempts(ids[1])
	if len(as) != 2 || !strings.Contains(as[0].Error, "deadline exceeded") {
		t.Errorf("slow: attempts %+v, want a timed-out first attempt", as)
	}
	for _, id := range ids {
		for _, a := range rg.attempts(id) {
			if strings.Contains(a.Error, "url-secret-token") {
				t.Errorf("error quotes the URL: %q", a.Error)
			}
		}
	}
}

// TestForwardMasksEchoedURLSecrets: a 404 reply whose body echoes the
// request (its raw request URI, its query values decoded, the
// Authorization header the client made from the URL's userinfo and the
// password decoded from it) shows
// none of the URL's password, Basic credential, query values or raw query
// in the error, which still gives the status and the rest of the body.
func TestForwardMasksEchoedURLSecrets(t *testing.T) {
	const (
		password = "pw-secret-123"
		token    = "url-secret-token"
		rawQuery = "token=" + token + "&x=a%2Fb"
	)
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		_, pw, _ := r.BasicAuth()
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "Cannot POST %s\nauth=%s password=%s token=%s",
			r.URL.RequestURI(), r.Header.Get("Authorization"), pw, r.URL.Query().Get("token"))
	})
	hookURL := strings.Replace(app.srv.URL, "http://", "http://user:"+password+"@", 1) + "/hook?" + rawQuery
	f := newForward(t, target.ForwardOptions{URL: hookURL})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("a 404 reply was taken as done")
	}
	cred := base64.StdEncoding.EncodeToString([]byte("user:" + password))
	if got := app.requests()[0].header.Get("Authorization"); got != "Basic "+cred {
		t.Fatalf("the app got Authorization %q, want the Basic credential of the URL", got)
	}
	text := err.Error()
	for _, secret := range []string{password, cred, token, rawQuery, "x=a%2Fb"} {
		if strings.Contains(text, secret) {
			t.Errorf("error quotes %q: %s", secret, text)
		}
	}
	if !strings.HasPrefix(text, "forward: 404 Not Found: Cannot POST /hook?") || !strings.Contains(text, "auth=Basic "+redact.Mask) {
		t.Errorf("error %q, want the 404 and the body with the secrets masked", text)
	}
}

// TestForwardReusesConnections: failed replies with a body are drained, so
// consecutive deliveries share one connection.
func TestForwardReusesConnections(t *testing.T) {
	app := newSink(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if n%2 == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.Repeat("stack trace line\n", 1000)) // 17 KB
			return
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, strings.Repeat("ok", 5000))
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL})
	for i := range 6 {
		ev := &hookbox.Event{ID: int64(i), Source: "s", DeliveryID: fmt.Sprint(i), Attempts: 1, Payload: []byte(`{}`)}
		err := f.Deliver(context.Background(), ev)
		if (i%2 == 0) != (err != nil) {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if err != nil && worker.IsPermanent(err) {
			t.Fatalf("500 is permanent: %v", err)
		}
	}
	remotes := map[string]bool{}
	for _, r := range app.requests() {
		remotes[r.remote] = true
	}
	if len(remotes) != 1 {
		t.Errorf("6 sequential deliveries used %d connections, want 1", len(remotes))
	}
}

// TestForwardRedirectNotFollowed: a 3xx is an error to retry, and the POST
// is not replayed somewhere else.
func TestForwardRedirectNotFollowed(t *testing.T) {
	other := newSink(t, status(http.StatusOK, ""))
	app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		http.Redirect(w, r, other.srv.URL, http.StatusPermanentRedirect)
	})
	f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{"X-Api-Key": sharedSecret}})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) || !strings.HasPrefix(err.Error(), "forward: 308 Permanent Redirect") {
		t.Errorf("err = %v, want a retryable 308 error", err)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("redirect followed: the other server got %d requests (with the secret header)", n)
	}
}

// TestForwardKeepsConcurrentConnections: a target worked 100 at a time
// (workers.concurrency 100) keeps its 100 connections between rounds
// instead of closing all but a fixed number and dialling again.
func TestForwardKeepsConcurrentConnections(t *testing.T) {
	const n = 100
	var mu sync.Mutex
	opened := 0
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived.Done()
		arrived.Wait() // all n in flight at once
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f := newForward(t, target.ForwardOptions{URL: srv.URL})
	for round := range 2 {
		arrived.Add(n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev := &hookbox.Event{ID: int64(round*n + i), Source: "s", DeliveryID: fmt.Sprint(round*n + i), Attempts: 1, Payload: []byte(`{}`)}
				if err := f.Deliver(context.Background(), ev); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != n {
		t.Errorf("two rounds of %d concurrent deliveries opened %d connections, want %d", n, opened, n)
	}
}
