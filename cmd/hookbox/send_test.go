package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/verify"
)

// receiver is a real HTTP server that verifies deliveries with the verify
// package, per source, and answers like hookbox: 202 with the stored id and
// whether it was a duplicate, 401 for a bad signature.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	verifier map[string]verify.Verifier
	ids      map[string]int // source/delivery id → row id
	got      []delivery
	rejected int
	inflight int
	maxIn    int
	hold     int // hold requests until this many are in flight (bounded)
}

type delivery struct {
	source, id, eventType string
	header                http.Header
	body                  []byte
	duplicate             bool
}

func newReceiver(t *testing.T, sources map[string]verify.Config) *receiver {
	t.Helper()
	rc := &receiver{verifier: map[string]verify.Verifier{}, ids: map[string]int{}}
	for name, c := range sources {
		v, err := verify.New(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rc.verifier[name] = v
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.inflight++
	rc.maxIn = max(rc.maxIn, rc.inflight)
	hold := rc.hold
	rc.mu.Unlock()
	defer func() { rc.mu.Lock(); rc.inflight--; rc.mu.Unlock() }()
	// Wait for the other copies to arrive, at most 20 s: long enough for
	// a loaded machine to start them all, and for copies sent one after
	// another to show as such (then none waits again).
	for deadline := time.Now().Add(20 * time.Second); hold > 0; time.Sleep(time.Millisecond) {
		rc.mu.Lock()
		if rc.maxIn >= hold {
			rc.mu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			rc.hold = 0
			rc.mu.Unlock()
			break
		}
		rc.mu.Unlock()
	}

	name, ok := strings.CutPrefix(r.URL.Path, "/webhooks/")
	v := rc.verifier[name]
	if !ok || v == nil || r.Method != http.MethodPost {
		http.Error(w, `{"error":"unknown source"}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	res, err := v.Verify(verify.Request{Header: r.Header, Body: body})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.rejected++
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":%q}`, err.Error())
		return
	}
	key := name + "/" + res.DeliveryID
	id, dup := rc.ids[key]
	if !dup {
		id = len(rc.ids) + 1
		rc.ids[key] = id
	}
	rc.got = append(rc.got, delivery{source: name, id: res.DeliveryID, eventType: res.EventType, header: r.Header.Clone(), body: body, duplicate: dup})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"id":%d,"duplicate":%t}`+"\n", id, dup)
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// runSendCmd runs `hookbox [--config FILE] send args…` through a root with
// the real persistent flags, and returns stdout, stderr and the error.
func runSendCmd(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	g := &globalFlags{}
	root := &cobra.Command{Use: "hookbox", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "")
	root.PersistentFlags().StringVar(&g.db, "db", "", "")
	root.AddCommand(newSendCmd(g))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

var sendSources = map[string]verify.Config{
	"polar":   {Scheme: "standard-webhooks", Secrets: []string{"whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI="}},
	"stripe":  {Scheme: "stripe", Secrets: []string{"whsec_send_test_stripe"}},
	"github":  {Scheme: "github", Secrets: []string{"gh-send-secret"}},
	"shopify": {Scheme: "hmac", Secrets: []string{"shop-secret"}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic"},
	"linear":  {Scheme: "hmac", Secrets: []string{"lin-secret"}, Header: "Linear-Signature", Prefix: "sha512=", Algorithm: "sha512", IDField: "webhookId", TypeField: "action"},
	"open":    {Scheme: "none", IDHeader: "X-Request-Id"},
}

func TestSendSchemesFromFlags(t *testing.T) {
	rc := newReceiver(t, sendSources)
	cases := []struct {
		source string
		args   []string
		id     string // "" when generated
	}{
		{"polar", []string{"--scheme", "standard-webhooks", "--secret", "whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI="}, "msg_fixed_1"},
		{"stripe", []string{"--scheme", "stripe", "--secret", "whsec_send_test_stripe"}, ""},
		{"github", []string{"--scheme", "github", "--secret", "gh-send-secret", "--type", "push"}, "6a1b2c3d-gh"},
		{"shopify", []string{"--scheme", "hmac", "--secret", "shop-secret", "--header", "X-Shopify-Hmac-Sha256", "--encoding", "base64", "--id-header", "X-Shopify-Webhook-Id", "--type-header", "X-Shopify-Topic", "--type", "orders/paid"}, "shop-1"},
		{"linear", []string{"--scheme", "hmac", "--secret", "lin-secret", "--header", "Linear-Signature", "--prefix", "sha512=", "--algorithm", "sha512", "--id-field", "webhookId", "--type-field", "action", "--type", "create"}, "lin-1"},
		{"open", []string{"--scheme", "none", "--id-header", "X-Request-Id"}, ""},
	}
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			args := append([]string{"send", "--url", rc.srv.URL + "/webhooks/" + c.source}, c.args...)
			if c.id != "" {
				args = append(args, "--delivery-id", c.id)
			}
			before := len(rc.deliveries())
			out, errOut, err := runSendCmd(t, "", args...)
			if err != nil {
				t.Fatalf("send: %v\nstdout: %s\nstderr: %s", err, out, errOut)
			}
			if !strings.HasPrefix(out, "202 Accepted {\"id\":") {
				t.Errorf("stdout %q", out)
			}
			ds := rc.deliveries()[before:]
			if len(ds) != 1 || ds[0].source != c.source || ds[0].duplicate {
				t.Fatalf("receiver got %+v", ds)
			}
			d := ds[0]
			switch {
			case c.id != "" && d.id != c.id:
				t.Errorf("delivery id %q, want %q", d.id, c.id)
			case c.source == "stripe" && !strings.HasPrefix(d.id, "evt_"):
				t.Errorf("stripe delivery id %q, want a generated evt_…", d.id)
			case c.source == "open" && !strings.HasPrefix(d.id, "msg_"):
				t.Errorf("delivery id %q, want a generated msg_…", d.id)
			}
			if !strings.Contains(errOut, d.id) {
				t.Errorf("stderr does not show the delivery id %s: %q", d.id, errOut)
			}
			if want := map[string]string{"polar": "hookbox.test", "stripe": "hookbox.test", "github": "push", "shopify": "orders/paid", "linear": "create"}[c.source]; d.eventType != want {
				t.Errorf("event type %q, want %q", d.eventType, want)
			}
			if ct := d.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if !json.Valid(d.body) {
				t.Errorf("generated body is not JSON: %q", d.body)
			}
		})
	}
	if rc.rejected != 0 {
		t.Errorf("%d deliveries rejected", rc.rejected)
	}
}

// TestSendFromConfig looks the source up in --config, takes the URL from
// its listen, and signs with its first secret.
func TestSendFromConfig(t *testing.T) {
	rc := newReceiver(t, map[string]verify.Config{
		"polar": {Scheme: "standard-webhooks", Secrets: []string{"whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI="}},
	})
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookbox.yaml")
	yaml := fmt.Sprintf(`listen: %q
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI=", "whsec_b2xkLXJvdGF0ZWQtc2VjcmV0"]
  - name: other
    scheme: none
`, strings.TrimPrefix(rc.srv.URL, "http://"))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runSendCmd(t, "", "--config", cfgPath, "send", "--source", "polar", "--delivery-id", "msg_cfg")
	if err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, errOut)
	}
	ds := rc.deliveries()
	if len(ds) != 1 || ds[0].id != "msg_cfg" {
		t.Fatalf("receiver got %+v", ds)
	}
	if !strings.Contains(errOut, "POST "+rc.srv.URL+"/webhooks/polar ") {
		t.Errorf("stderr %q does not show the URL from listen", errOut)
	}

	_, _, err = runSendCmd(t, "", "--config", cfgPath, "send", "--source", "nope")
	if err == nil || !strings.Contains(err.Error(), "polar, other") {
		t.Errorf("unknown source: %v", err)
	}
}

// TestSendCopies sends one signed delivery five times, at once and one
// after another: the receiver sees five valid copies of one delivery.
func TestSendCopies(t *testing.T) {
	for _, concurrent := range []bool{true, false} {
		t.Run(fmt.Sprint("concurrent=", concurrent), func(t *testing.T) {
			rc := newReceiver(t, sendSources)
			args := []string{"send", "--scheme", "stripe", "--secret", "whsec_send_test_stripe",
				"--url", rc.srv.URL + "/webhooks/stripe", "--copies", "5", "--json"}
			if concurrent {
				rc.hold = 5
				args = append(args, "--concurrent")
			}
			out, errOut, err := runSendCmd(t, "", args...)
			if err != nil {
				t.Fatalf("send: %v\n%s%s", err, out, errOut)
			}
			var replies []struct {
				Copy       int    `json:"copy"`
				DeliveryID string `json:"delivery_id"`
				Status     int    `json:"status"`
				Body       struct {
					ID        int  `json:"id"`
					Duplicate bool `json:"duplicate"`
				} `json:"body"`
			}
			if err := json.Unmarshal([]byte(out), &replies); err != nil {
				t.Fatalf("--json output %q: %v", out, err)
			}
			if len(replies) != 5 {
				t.Fatalf("%d replies, want 5", len(replies))
			}
			fresh := 0
			for i, r := range replies {
				if r.Copy != i+1 || r.Status != 202 || r.Body.ID != 1 || !strings.HasPrefix(r.DeliveryID, "evt_") {
					t.Errorf("reply %d: %+v", i, r)
				}
				if !r.Body.Duplicate {
					fresh++
				}
			}
			if fresh != 1 {
				t.Errorf("%d replies say new, want exactly 1", fresh)
			}
			ds := rc.deliveries()
			if len(ds) != 5 {
				t.Fatalf("receiver got %d copies", len(ds))
			}
			for _, d := range ds {
				if d.id != ds[0].id || !bytes.Equal(d.body, ds[0].body) || d.header.Get("Stripe-Signature") != ds[0].header.Get("Stripe-Signature") {
					t.Errorf("copies differ: %+v vs %+v", d, ds[0])
				}
			}
			wantIn := 1
			if concurrent {
				wantIn = 5
			}
			if rc.maxIn != wantIn {
				t.Errorf("at most %d copies in flight, want %d", rc.maxIn, wantIn)
			}
		})
	}
}

// TestSendFile sends a body from a file and from stdin byte for byte; a
// stripe delivery takes its id from the file.
func TestSendFile(t *testing.T) {
	rc := newReceiver(t, sendSources)
	body := "{\n  \"id\": \"evt_fromfile\",  \"type\": \"charge.succeeded\" }\n"
	path := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runSendCmd(t, "", "send", "--scheme", "stripe", "--secret", "whsec_send_test_stripe",
		"--url", rc.srv.URL+"/webhooks/stripe", "--file", path)
	if err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, errOut)
	}
	stdinBody := "raw \x00 bytes, not JSON\n"
	out, errOut, err = runSendCmd(t, stdinBody, "send", "--scheme", "standard-webhooks", "--secret", "whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI=",
		"--url", rc.srv.URL+"/webhooks/polar", "--file", "-", "--delivery-id", "msg_stdin", "--content-type", "application/octet-stream")
	if err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, errOut)
	}
	ds := rc.deliveries()
	if len(ds) != 2 {
		t.Fatalf("receiver got %d deliveries", len(ds))
	}
	if ds[0].id != "evt_fromfile" || ds[0].eventType != "charge.succeeded" || string(ds[0].body) != body {
		t.Errorf("file: %+v", ds[0])
	}
	if ds[1].id != "msg_stdin" || string(ds[1].body) != stdinBody || ds[1].header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("stdin: %+v", ds[1])
	}
}

// TestSendRejected: a receiver with another secret answers 401; send
// prints the reply and fails, without printing the secret.
func TestSendRejected(t *testing.T) {
	rc := newReceiver(t, map[string]verify.Config{"github": {Scheme: "github", Secrets: []string{"the-right-secret"}}})
	out, errOut, err := runSendCmd(t, "", "send", "--scheme", "github", "--secret", "a-wrong-secret",
		"--url", rc.srv.URL+"/webhooks/github", "--copies", "2")
	if err == nil || !strings.Contains(err.Error(), "2 of 2 copies were not accepted") {
		t.Errorf("err = %v", err)
	}
	if !strings.Contains(out, "copy 1: 401 Unauthorized") || !strings.Contains(out, "copy 2: 401 Unauthorized") {
		t.Errorf("stdout %q", out)
	}
	if strings.Contains(out+errOut, "a-wrong-secret") {
		t.Errorf("output shows the secret: %s%s", out, errOut)
	}
	if rc.rejected != 2 {
		t.Errorf("receiver rejected %d, want 2", rc.rejected)
	}
}

func TestSendFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"send"}, "say how to sign"},
		{[]string{"send", "--source", "x"}, "pass --config"},
		{[]string{"send", "--source", "x", "--secret", "s"}, "--secret needs --scheme"},
		{[]string{"send", "--scheme", "stripe"}, "secrets"},
		{[]string{"send", "--scheme", "github", "--secret", "s", "--header", "X-Sig"}, "only used by the hmac and token schemes"},
		{[]string{"send", "--scheme", "none", "--copies", "0"}, "--copies"},
		{[]string{"send", "--scheme", "none", "--url", "ftp://x"}, "--url"},
		{[]string{"send", "--scheme", "none", "--url", "http://127.0.0.1:1/x", "--file", "/nonexistent/file"}, "--file"},
	}
	for _, c := range cases {
		_, _, err := runSendCmd(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to mention %q", c.args, err, c.want)
		}
	}
	// No receiver listening: the error says so, once (TestSendRefusedSaidOnce).
	out, _, err := runSendCmd(t, "", "send", "--scheme", "none", "--url", "http://127.0.0.1:1/webhooks/x", "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "connection refused") || out != "" {
		t.Errorf("unreachable: %v, %q", err, out)
	}
}

// closedAddr returns a loopback address nothing listens on: a port just
// handed out by the kernel and closed again.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestSendServerNotRunning: with no server at the address send finds as
// serve does (the config's listen, or --listen over it), send says hookbox
// is not running there and names the address; --listen reaches a server
// the config's listen does not name; an explicit --url that nothing
// answers is reported as such.
func TestSendServerNotRunning(t *testing.T) {
	down := closedAddr(t)
	rc := newReceiver(t, map[string]verify.Config{"polar": {Scheme: "standard-webhooks", Secrets: []string{"whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI="}}})
	up := strings.TrimPrefix(rc.srv.URL, "http://")
	cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
	doc := fmt.Sprintf("listen: %q\nsources:\n  - name: polar\n    scheme: standard-webhooks\n    secrets: [\"whsec_c2VuZC10ZXN0LXNlY3JldC1mb3ItcG9sYXI=\"]\n", down)
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, copies := range []string{"1", "3"} {
		out, _, err := runSendCmd(t, "", "--config", cfgPath, "send", "--source", "polar", "--copies", copies)
		if err == nil || !strings.Contains(err.Error(), "hookbox is not running at "+down) {
			t.Errorf("--copies %s, config listen %s down: err %v, want it to say hookbox is not running at %s (stdout %q)", copies, down, err, down, out)
		}
	}
	_, _, err := runSendCmd(t, "", "--config", cfgPath, "send", "--source", "polar", "--listen", up)
	if err != nil {
		t.Errorf("--listen %s (a running receiver): %v", up, err)
	}
	if n := len(rc.deliveries()); n != 1 {
		t.Errorf("receiver got %d deliveries, want 1", n)
	}
	_, _, err = runSendCmd(t, "", "send", "--scheme", "none", "--listen", down)
	if err == nil || !strings.Contains(err.Error(), "hookbox is not running at "+down) {
		t.Errorf("--listen %s down: %v", down, err)
	}
	_, _, err = runSendCmd(t, "", "send", "--scheme", "none", "--url", "http://"+down+"/webhooks/x")
	if err == nil || !strings.Contains(err.Error(), "nothing is listening at "+down) {
		t.Errorf("--url at %s down: %v", down, err)
	}
	_, _, err = runSendCmd(t, "", "send", "--scheme", "none", "--url", "http://"+up+"/webhooks/x", "--listen", up)
	if err == nil || !strings.Contains(err.Error(), "--url and --listen") {
		t.Errorf("--url with --listen: %v", err)
	}
}

// TestServeAndSendShareListen: serve and send resolve the address the same
// way: the flag, else the config's listen, else the default.
func TestServeAndSendShareListen(t *testing.T) {
	cases := []struct {
		flag, config, want string
	}{
		{"", "", DefaultListen},
		{"", "127.0.0.1:9001", "127.0.0.1:9001"},
		{"127.0.0.1:9002", "127.0.0.1:9001", "127.0.0.1:9002"},
	}
	for _, c := range cases {
		if got := listenAddr(c.flag, &config.Config{Listen: c.config}); got != c.want {
			t.Errorf("listenAddr(%q, listen %q) = %q, want %q", c.flag, c.config, got, c.want)
		}
	}
	if got := defaultSendURL(":8080", "polar"); got != "http://127.0.0.1:8080/webhooks/polar" {
		t.Errorf("defaultSendURL(:8080) = %q", got)
	}
}

// TestSendTimestampUnit: hookbox send signs an hmac source's timestamp in
// its timestamp_unit, from flags (--timestamp-unit) and from --config, as
// a Webflow-style sender does: 13 digits, an HMAC-SHA256 in hex over
// "{timestamp}:{body}", checked here by hand.
func TestSendTimestampUnit(t *testing.T) {
	const secret = "wf-send-secret"
	rc := newReceiver(t, map[string]verify.Config{"webflow": {Scheme: "hmac", Secrets: []string{secret}, Header: "X-Webflow-Signature",
		TimestampHeader: "X-Webflow-Timestamp", Signed: "{timestamp}:{body}", TimestampUnit: "ms"}})
	flags := []string{"--scheme", "hmac", "--secret", secret, "--header", "X-Webflow-Signature", "--signed", "{timestamp}:{body}",
		"--timestamp-header", "X-Webflow-Timestamp", "--url", rc.srv.URL + "/webhooks/webflow"}
	before := time.Now()
	if out, errOut, err := runSendCmd(t, "", append([]string{"send", "--timestamp-unit", "ms"}, flags...)...); err != nil {
		t.Fatalf("send --timestamp-unit ms: %v\n%s%s", err, out, errOut)
	}
	ds := rc.deliveries()
	if len(ds) != 1 {
		t.Fatalf("receiver got %+v", ds)
	}
	ts := ds[0].header.Get("X-Webflow-Timestamp")
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(ts) != 13 || ms < before.UnixMilli() || ms > time.Now().UnixMilli() {
		t.Fatalf("X-Webflow-Timestamp %q, want the send's time in milliseconds", ts)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + ":" + string(ds[0].body)))
	if got, want := ds[0].header.Get("X-Webflow-Signature"), hex.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("X-Webflow-Signature %q, want %q", got, want)
	}

	// From the config, the source's timestamp_unit.
	cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
	doc := fmt.Sprintf(`listen: %q
sources:
  - name: webflow
    scheme: hmac
    header: X-Webflow-Signature
    timestamp_header: X-Webflow-Timestamp
    timestamp_unit: ms
    signed: "{timestamp}:{body}"
    secrets: [%q]
    store_only: true
`, strings.TrimPrefix(rc.srv.URL, "http://"), secret)
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := runSendCmd(t, "", "--config", cfgPath, "send", "--source", "webflow"); err != nil {
		t.Fatalf("send --source webflow: %v\n%s%s", err, out, errOut)
	}
	if ds := rc.deliveries(); len(ds) != 2 || len(ds[1].header.Get("X-Webflow-Timestamp")) != 13 {
		t.Fatalf("receiver got %+v", ds)
	}

	// Signed in seconds, the receiver in ms says which unit it got.
	out, _, err := runSendCmd(t, "", append([]string{"send"}, flags...)...)
	if err == nil || !strings.Contains(out, "401 Unauthorized") || !strings.Contains(out, "timestamp is in seconds, not milliseconds") {
		t.Fatalf("send in seconds to an ms receiver: %v, %q", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--source", "x", "--timestamp-unit", "ms"}, "--timestamp-unit needs --scheme or --provider"},
		{append([]string{"send", "--timestamp-unit", "sec"}, flags...), "--scheme hmac: timestamp_unit: must be s (unix seconds"},
	} {
		if _, _, err := runSendCmd(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to mention %q", c.args, err, c.want)
		}
	}
}

// TestSendMasksURLPassword: send printed the URL it posts to whole, a
// password in its user info included (http://user:PASSWORD@host/…),
// where net/http's own errors show "***"; it shows the URL as they do.
func TestSendMasksURLPassword(t *testing.T) {
	const password = "send-url-password-4711"
	rc := newReceiver(t, map[string]verify.Config{"x": {Scheme: "none"}})
	u := strings.Replace(rc.srv.URL, "http://", "http://user:"+password+"@", 1) + "/webhooks/x"
	for _, args := range [][]string{
		{"send", "--scheme", "none", "--url", u},
		{"send", "--scheme", "none", "--url", u, "--json"},
		{"send", "--scheme", "none", "--url", strings.Replace(u, rc.srv.URL[len("http://"):], closedAddr(t), 1)},
	} {
		out, errOut, err := runSendCmd(t, "", args...)
		text := out + errOut
		if err != nil {
			text += err.Error()
		}
		if strings.Contains(text, password) {
			t.Errorf("hookbox %s shows the URL's password:\n%s", strings.Join(args, " "), text)
		}
		if !strings.Contains(text, "user:") && !strings.Contains(args[len(args)-1], "--json") && err == nil {
			t.Errorf("hookbox %s does not show the URL:\n%s", strings.Join(args, " "), text)
		}
	}
}

// TestSendRefusesIgnoredSigningKey: send refuses --signing-key with a
// scheme that signs with a shared secret, as it refuses any flag its
// scheme does not use (--header with --scheme github); it signed with
// the secret, ignored the key and exited 0.
func TestSendRefusesIgnoredSigningKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	_, _, err := runSendCmd(t, "", "send", "--scheme", "github", "--secret", "gh-send-secret-long",
		"--signing-key", "whsk_not-used-by-github", "--url", srv.URL+"/webhooks/github")
	if err == nil || !strings.Contains(err.Error(), "signing-key") {
		t.Fatalf("send --scheme github --signing-key K: err = %v; want it refused as --header is, since github signs with the secret and the key is ignored", err)
	}
}

// TestSendTypeHeaderWithGitHub: --type-header is the header carrying the
// event type whatever the scheme, and a github source may set a
// type_header of its own; send set only X-GitHub-Event for github, so such
// a receiver stored no event type (found by a helper's review, session
// 44).
func TestSendTypeHeaderWithGitHub(t *testing.T) {
	rc := newReceiver(t, map[string]verify.Config{
		"gh": {Scheme: "github", Secrets: []string{"gh-type-secret"}, TypeHeader: "X-Kind"},
	})
	out, errOut, err := runSendCmd(t, "", "send", "--scheme", "github", "--secret", "gh-type-secret",
		"--type-header", "X-Kind", "--type", "push", "--url", rc.srv.URL+"/webhooks/gh")
	if err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, errOut)
	}
	if ds := rc.deliveries(); len(ds) != 1 || ds[0].eventType != "push" || ds[0].header.Get("X-Github-Event") != "push" {
		t.Fatalf("receiver with type_header X-Kind: %+v; want event type push, and X-GitHub-Event push", ds)
	}
}
