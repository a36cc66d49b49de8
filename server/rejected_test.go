package server

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// rejections is a RejectionLog that keeps what it is given and admits as
// many as allow says.
type rejections struct {
	mu    sync.Mutex
	allow bool
	asked []string
	got   []hookbox.Rejection
}

func (l *rejections) Allow(source string, known bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !known {
		source = "?" + source
	}
	l.asked = append(l.asked, source)
	return l.allow
}

func (l *rejections) Record(r hookbox.Rejection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r)
}

func (l *rejections) MaxBodyBytes() int { return 16 }

// TestRefusalsAreLogged: each refusal of the kinds the log keeps is
// handed over with what was known of it (400, 401, 404, 413; a 403 is
// not); an unknown source's body is read only when the log admits it,
// and only up to the log's limit.
func TestRefusalsAreLogged(t *testing.T) {
	const secret = "whsec_c2VydmVyLXJlamVjdGlvbi10ZXN0cy1zZWNyZXQ="
	v, err := verify.New(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	none, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	log := &rejections{allow: true}
	srv := New(Config{
		Sources: []Source{{Name: "polar", Verifier: v}, {Name: "tiny", Verifier: none, MaxBodyBytes: 8},
			{Name: "walled", Verifier: none, AllowIPs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}},
		Ingest:     (&recorder{}).ingest,
		Rejections: log,
	})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	post := func(path, body string, hdr http.Header) int {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong, _ := verify.Sign(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"whsec_b3RoZXItc2VjcmV0LW5vdC1ob29rYm94cw=="}},
		[]byte(`{"a":1}`), "msg_1", time.Now())
	cases := []struct {
		path, body string
		hdr        http.Header
		status     int
		size       int64
		body16     string
		complete   bool
	}{
		{"/webhooks/polar", `{"a":1}`, wrong, 401, 7, `{"a":1}`, true},
		{"/webhooks/polar", `{}`, nil, 401, 2, "", false},                                // no signature: refused from the headers
		{"/webhooks/tiny", `0123456789`, http.Header{"X-Id": {"1"}}, 413, 10, "", false}, // declared too large: not read
		{"/webhooks/tiny", `{}`, nil, 400, 2, `{}`, true},                                // no id header
		{"/webhooks/nope", `0123456789abcdef-and-more`, nil, 404, 25, `0123456789abcdef`, false},
		{"/webhooks/nope", `short`, nil, 404, 5, `short`, true},
	}
	for i, c := range cases {
		if st := post(c.path, c.body, c.hdr); st != c.status {
			t.Fatalf("case %d: %d, want %d", i, st, c.status)
		}
		if len(log.got) != i+1 {
			t.Fatalf("case %d: %d logged", i, len(log.got))
		}
		r := log.got[i]
		if r.Status != c.status || r.BodySize != c.size || string(r.Body) != c.body16 || r.BodyComplete != c.complete ||
			r.RemoteAddr != "127.0.0.1" || r.Reason == "" || r.ReceivedAt.IsZero() {
			t.Errorf("case %d logged %+v body %q", i, r, r.Body)
		}
		if r.UnknownSource != strings.HasSuffix(c.path, "nope") {
			t.Errorf("case %d: unknown source %v", i, r.UnknownSource)
		}
	}
	if st := post("/webhooks/walled", `{}`, http.Header{"X-Id": {"1"}}); st != 403 || len(log.got) != len(cases) {
		t.Errorf("a 403 is logged: %d, %d logged", st, len(log.got))
	}
	if log.got[0].Header.Get("Webhook-Signature") == "" {
		t.Errorf("the log is not given the signature to re-check")
	}

	// Refused by the rate limit: nothing recorded, the body not read.
	log.allow = false
	if st := post("/webhooks/nope", `{"x":1}`, nil); st != 404 || len(log.got) != len(cases) {
		t.Errorf("rate-limited unknown source: %d, %d logged", st, len(log.got))
	}
	if last := log.asked[len(log.asked)-1]; last != "?nope" {
		t.Errorf("asked the log about %q", last)
	}
}
