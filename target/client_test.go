package target_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// rawReceiver is a TCP server on 127.0.0.1 that reads each request whole
// and then writes reply to the connection as it is, HTTP or not, and
// closes it. It returns the URL to forward to.
func rawReceiver(t *testing.T, reply func(w io.Writer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if _, err := io.Copy(io.Discard, req.Body); err != nil {
					return
				}
				w := bufio.NewWriter(c)
				reply(w)
				w.Flush()
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook"
}

// TestForwardNeverFollowsRedirects: with a client of the caller's whose
// CheckRedirect follows redirects (http.Client's default), a 3xx reply is
// still the answer, retried: the host the Location names gets nothing,
// neither the body and signature nor the configured secret header (a 307
// or 308 replays them all; Go drops only Authorization and Cookie on the
// way to another host). The caller's client is left as it was.
func TestForwardNeverFollowsRedirects(t *testing.T) {
	other := newSink(t, status(http.StatusOK, ""))
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		app := newSink(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			http.Redirect(w, r, other.srv.URL+"/elsewhere", code)
		})
		client := &http.Client{}
		f := newForward(t, target.ForwardOptions{URL: app.srv.URL, Headers: map[string]string{"X-Api-Key": sharedSecret}, Client: client})
		ev := &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{"a":1}`),
			Header: http.Header{"Stripe-Signature": {"t=1,v1=abc"}}}
		err := f.Deliver(context.Background(), ev)
		want := fmt.Sprintf("forward: %d %s (redirect not followed", code, http.StatusText(code))
		if err == nil || worker.IsPermanent(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%d: err = %v, want a retryable error starting %q", code, err, want)
		}
		if client.CheckRedirect != nil {
			t.Errorf("%d: NewForward changed the caller's client", code)
		}
		if n := len(app.requests()); n != 1 {
			t.Errorf("%d: the app got %d requests, want 1", code, n)
		}
	}
	for _, r := range other.requests() {
		t.Errorf("a redirect was followed: the other host got X-Api-Key %q, Stripe-Signature %q, Idempotency-Key %q, body %q",
			r.header.Get("X-Api-Key"), r.header.Get("Stripe-Signature"), r.header.Get(target.HeaderIdempotencyKey), r.body)
	}
}

// TestForwardBoundsReplyHeaders: a reply whose headers run to a megabyte
// is not read whole (net/http reads up to 10 MiB of them, per attempt in
// flight): the attempt fails, to be retried, saying why.
func TestForwardBoundsReplyHeaders(t *testing.T) {
	u := rawReceiver(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\n")
		for i := range 1024 {
			fmt.Fprintf(w, "X-Filler-%d: %s\r\n", i, strings.Repeat("f", 1000))
		}
		io.WriteString(w, "Content-Length: 0\r\n\r\n")
	})
	f := newForward(t, target.ForwardOptions{URL: u})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) || !strings.Contains(err.Error(), "response headers exceeded") {
		t.Errorf("err = %v, want a retryable error for the reply's headers", err)
	}
}

// TestForwardBoundsTransportErrors: a receiver whose status line is not
// HTTP makes net/http fail quoting the whole line, escaped (here 60 KiB
// of control bytes, four times that quoted); the attempt's error keeps
// no more of it than the worker stores (worker.MaxErrorText), so neither
// the attempt's span nor a log line carries the rest.
func TestForwardBoundsTransportErrors(t *testing.T) {
	u := rawReceiver(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1"+strings.Repeat("\x01", 60<<10)+"\r\n\r\n")
	})
	f := newForward(t, target.ForwardOptions{URL: u})
	err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "1", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	text := err.Error()
	if max := len("forward: ") + worker.MaxErrorText; len(text) > max {
		t.Errorf("the error is %d bytes, want at most %d: %.120s…", len(text), max, text)
	}
	if !strings.HasPrefix(text, `forward: net/http: HTTP/1.x transport connection broken: malformed HTTP response "HTTP/1.1\x01`) {
		t.Errorf("error %.200q…, want the start of net/http's", text)
	}
}

// TestForwardRefusesUnusableProxyEnvironment: a proxy variable that is
// not a URL (a bare "%" in its password) is one net/http ignores, sending
// the forwards directly instead; NewForward refuses it, naming the
// variable and quoting none of it, for the URLs it would proxy: not for
// those NO_PROXY exempts, nor loopback ones (never proxied), nor those of
// the other scheme.
func TestForwardRefusesUnusableProxyEnvironment(t *testing.T) {
	const password = "50%off-proxy-pass"
	bad := "http://user:" + password + "@proxy.example:3128"
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(name, "")
	}
	refused := func(url string) error {
		_, err := target.NewForward(target.ForwardOptions{URL: url})
		return err
	}
	t.Setenv("HTTP_PROXY", bad)
	err := refused("http://app.example/hooks")
	if err == nil || !strings.Contains(err.Error(), "HTTP_PROXY") || !strings.Contains(err.Error(), "is not a URL") {
		t.Errorf("bad HTTP_PROXY: err = %v, want it named", err)
	} else if strings.Contains(err.Error(), "50%off") || strings.Contains(err.Error(), "proxy.example") {
		t.Errorf("the error quotes the variable: %v", err)
	}
	for _, url := range []string{"https://app.example/hooks", "http://127.0.0.1:8080/hooks", "http://localhost/hooks"} {
		if err := refused(url); err != nil {
			t.Errorf("bad HTTP_PROXY, %s (not proxied): %v", url, err)
		}
	}
	t.Setenv("NO_PROXY", ".example")
	if err := refused("http://app.example/hooks"); err != nil {
		t.Errorf("bad HTTP_PROXY, app.example in NO_PROXY: %v", err)
	}
	t.Setenv("NO_PROXY", "")
	if _, err := target.NewForward(target.ForwardOptions{URL: "http://app.example/hooks", Client: &http.Client{}}); err != nil {
		t.Errorf("bad HTTP_PROXY, the caller's client (its own proxy): %v", err)
	}

	t.Setenv("HTTP_PROXY", "")
	t.Setenv("https_proxy", bad)
	if err := refused("https://app.example/hooks"); err == nil || !strings.Contains(err.Error(), "HTTPS_PROXY") {
		t.Errorf("bad https_proxy: err = %v, want HTTPS_PROXY named", err)
	}
	for _, good := range []string{"http://user:50%25off@proxy.example:3128", "proxy.example:3128", "socks5://proxy.example:1080"} {
		t.Setenv("https_proxy", good)
		if err := refused("https://app.example/hooks"); err != nil {
			t.Errorf("https_proxy %s: %v", good, err)
		}
	}
}

// TestForwardUsesTheEnvironmentsProxy: the default client sends through
// the proxy HTTP_PROXY names (for https URLs, HTTPS_PROXY's, by CONNECT),
// except to loopback addresses, which go directly. net/http reads the
// variables once per process, so the deliveries run in a child process
// of the test binary, with the variables set.
func TestForwardUsesTheEnvironmentsProxy(t *testing.T) {
	if os.Getenv("HOOKBOX_TEST_PROXY_CHILD") != "" {
		for _, url := range strings.Fields(os.Getenv("HOOKBOX_TEST_PROXY_URLS")) {
			f := newForward(t, target.ForwardOptions{URL: url})
			if err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d1", Attempts: 1, Payload: []byte(`{}`)}); err != nil {
				t.Errorf("%s: %v", url, err)
			}
		}
		return
	}
	var mu sync.Mutex
	var proxied []string // each request's target as the proxy got it
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.Method+" "+r.RequestURI+" "+r.Header.Get(target.HeaderIdempotencyKey))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(proxy.Close)
	direct := newSink(t, status(http.StatusNoContent, ""))

	cmd := exec.Command(os.Args[0], "-test.run=^TestForwardUsesTheEnvironmentsProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOOKBOX_TEST_PROXY_CHILD=1",
		"HOOKBOX_TEST_PROXY_URLS=http://app.example/hooks "+direct.srv.URL+"/hooks",
		"HTTP_PROXY="+proxy.URL, "http_proxy=", "NO_PROXY=", "no_proxy=", "REQUEST_METHOD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "POST http://app.example/hooks s:d1"; len(proxied) != 1 || proxied[0] != want {
		t.Errorf("the proxy got %q, want [%q]", proxied, want)
	}
	if n := len(direct.requests()); n != 1 {
		t.Errorf("the loopback app got %d requests, want 1 (directly)", n)
	}
}

// TestForwardStatusBelow100: net/http's client takes any three digits as a
// status, so a broken receiver's "099" reply reached the branch for a 101
// and was described as a receiver that switched protocols. It is still an
// error to retry (nothing says the app took the event), and its message
// now says what came back.
func TestForwardStatusBelow100(t *testing.T) {
	url := rawReceiver(t, func(w io.Writer) {
		io.WriteString(w, "HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n")
	})
	f, err := target.NewForward(target.ForwardOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
	if err == nil || worker.IsPermanent(err) {
		t.Fatalf("Deliver = %v, want an error to retry", err)
	}
	if msg := err.Error(); strings.Contains(msg, "switched protocols") || !strings.Contains(msg, "99") || !strings.Contains(msg, "not an HTTP status") {
		t.Errorf("Deliver = %q, want it to say status 99 is not an HTTP status", msg)
	}
}

// TestForwardMasksProxyCredentials: the proxy the environment names
// (HTTP_PROXY=http://user:password@proxy:3128) gets the credential as
// Proxy-Authorization; a proxy that refuses the forward and echoes it in
// its reply, a 407 page, had it quoted, base64 and all, in the forward's
// error, which the database keeps and the console shows. Its password and
// the credential are masked, as the forward URL's own are.
func TestForwardMasksProxyCredentials(t *testing.T) {
	const password = "proxy-pass-5e4d3c"
	if os.Getenv("HOOKBOX_TEST_PROXY_CHILD") != "" {
		f := newForward(t, target.ForwardOptions{URL: "http://app.example/hooks"})
		err := f.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d1", Attempts: 1, Payload: []byte(`{}`)})
		if err == nil {
			t.Fatal("delivered through a proxy that refuses")
		}
		credential := base64.StdEncoding.EncodeToString([]byte("proxyuser:" + password))
		for _, secret := range []string{password, credential, strings.TrimRight(credential, "=")} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows %q: %v", secret, err)
			}
		}
		if !strings.Contains(err.Error(), "407") || !strings.Contains(err.Error(), "Basic "+redact.Mask) {
			t.Errorf("the error does not say the proxy refused with the credential masked: %v", err)
		}
		return
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused Proxy-Authorization: "+r.Header.Get("Proxy-Authorization"), http.StatusProxyAuthRequired)
	}))
	t.Cleanup(proxy.Close)
	cmd := exec.Command(os.Args[0], "-test.run=^TestForwardMasksProxyCredentials$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "HOOKBOX_TEST_PROXY_CHILD=1",
		"HTTP_PROXY=http://proxyuser:"+password+"@"+proxy.Listener.Addr().String(), "http_proxy=", "NO_PROXY=", "no_proxy=", "REQUEST_METHOD=")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
