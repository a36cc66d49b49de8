package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// canaries are distinct values put in every slot of the configuration
// that can hold a secret. None of them, in any form listed by
// canaryForms, may appear in anything hookbox emits.
var canaries = map[string]string{
	"admin_token": "cnryAdminTok-4f9e1c7b2a",
	"sw_key1":     "cnrySwKeyOne-8d3b6a1f0e", // base64 after whsec_
	"sw_key2":     "cnrySwKeyTwo-2c7e9b4d1a",
	"github":      "cnryGitHubSec-6a1d8f3c9b",
	"stripe":      "whsec_cnryStripeSec-1b4e7a2d",
	"hmac":        "cnryHmacSecret-3e8c1f6a4d",
	"token":       "cnryTokenSecret-9f2a5c8e1b",
	"basic":       "cnryBasicUser:cnryBasicPass-5d1a",
	"mailgun":     "cnryMailgunKey-7c3e0b9f2a",
	"fwd_pass":    "cnryFwdPass-1f2e3d4c5b",
	// The user name beside a password is shown (config check shows
	// https://deploy:[REDACTED]@…); the two as the Basic credential the
	// client sends are a secret.
	"fwd_basic":            "appuser:cnryFwdPass-1f2e3d4c5b",
	"pg_pass":              "cnryPgPassword-8e7d6c5b4a",
	"fwd_query":            "cnryFwdQuery-6b5a4f3e2d",
	"fwd_bearer":           "cnryFwdBearer-7e6d5c4b3a",
	"dead_pass":            "cnryDeadPass-8a7b6c5d4e",
	"dead_query":           "cnryDeadQuery-9b8a7f6e5d",
	"dead_bearer":          "cnryDeadBearer-0c9b8a7f6e",
	"exec_env":             "cnryExecEnv-1d0c9b8a7f",
	"exec_arg":             "cnryExecArg-2e1d0c9b8a",
	"sign":                 "cnrySignKey-3f2e1d0c9b", // base64 after whsec_
	"target_fwd_bearer":    "cnryTgtBearer-4a3f2e1d0c",
	"target_fwd_query":     "cnryTgtQuery-5b4a3f2e1d",
	"env_forward_token":    "cnryEnvFwdTok-6c5b4a3f2e",
	"target_exec_env_name": "cnryTgtExecEnv-7d6c5b4a3f",
	// Written literally in exec arguments: a URL's password, curl's
	// -u user:password, --flag=value and --flag value of credential
	// flags, a URL query's token, and a flag in a shell script.
	"arg_url_pass":   "cnryArgUrlPass-8e7d6c5b4a",
	"arg_curl_user":  "cnryArgCurlPass-9f8e7d6c5b",
	"arg_token_eq":   "cnryArgTokenEq-0a9f8e7d6c",
	"arg_password":   "cnryArgPassword-1b0a9f8e7d",
	"arg_query":      "cnryArgQuery-2c1b0a9f8e",
	"arg_script_key": "cnryArgScriptKey-3d2c1b0a9f",
	// ${NAME:-default} defaults used, the variables unset: in an exec
	// argument and in a forward URL's path.
	"default_arg":     "cnryDefaultArg-4e3d2c1b0a",
	"default_forward": "cnryDefaultFwd-5f4e3d2c1b",
}

// canaryForms returns the strings that would show secret: itself, its
// base64 (standard, URL-safe, padded or not, which share a prefix) and
// hex forms, its query escaping, and its first 16 bytes (a long prefix:
// the canaries are distinct well before that).
func canaryForms(secret string) []string {
	b := []byte(secret)
	forms := []string{secret, base64.RawStdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		hex.EncodeToString(b), url.QueryEscape(secret)}
	if len(secret) > 16 {
		forms = append(forms, secret[:16])
	}
	return forms
}

// leaks returns, for each canary found in text in any form, a line naming
// it, the form and where it appears.
func leaks(text string) []string {
	var out []string
	names := make([]string, 0, len(canaries))
	for name := range canaries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		secret := canaries[name]
		forms := canaryForms(secret)
		if key, ok := strings.CutPrefix(secret, "whsec_"); ok {
			forms = append(forms, canaryForms(key)...)
		}
		for _, f := range forms {
			if i := strings.Index(text, f); i >= 0 {
				from, to := max(i-80, 0), min(i+len(f)+80, len(text))
				out = append(out, fmt.Sprintf("%s (as %q) in …%s…", name, f, text[from:to]))
				break
			}
		}
	}
	return out
}

// whsec is a Standard Webhooks secret whose key is key.
func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// echoApp is the forward targets' app: it answers 500 with everything it
// was sent, the Authorization header and the URL with its query first
// (hookbox keeps the start of an answer), then every header and the body,
// as a debugging app does; at /redir it sends the client back where it
// came from, the query in Location.
func echoApp() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redir" {
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "auth=%s url=%s\n", r.Header.Get("Authorization"), r.URL.String())
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
		}
		body, _ := io.ReadAll(r.Body)
		b.Write(body)
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		http.Error(w, b.String(), http.StatusInternalServerError)
	}))
}

// listenWriter collects serve's log and reports the address of its
// "listening" line.
type listenWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

// listeningLine finds the address in the start line, in the text or the
// JSON format.
var listeningLine = regexp.MustCompile(`(?:msg=listening addr=|"msg":"listening","addr":")([^\s"]+)`)

func (l *listenWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.sent {
		if m := listeningLine.FindStringSubmatch(l.buf.String()); m != nil {
			l.sent = true
			l.addr <- m[1]
		}
	}
	return len(p), nil
}

func (l *listenWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// serveInProcess runs hookbox serve with the config at cfgPath on dbURL,
// on a port of its own, until ctx ends; it returns the address it
// listens on, its log, and where its end is reported.
func serveInProcess(t *testing.T, ctx context.Context, cfgPath, dbURL string) (string, *listenWriter, chan error) {
	t.Helper()
	log := &listenWriter{addr: make(chan string, 1)}
	served := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(log)
		root.SetErr(log)
		root.SetArgs([]string{"serve", "--config", cfgPath, "--db", dbURL, "--listen", "127.0.0.1:0"})
		served <- root.ExecuteContext(ctx)
	}()
	select {
	case addr := <-log.addr:
		return addr, log, served
	case err := <-served:
		t.Fatalf("serve stopped: %v\n%s", err, log)
		return "", nil, nil
	}
}

// canaryConfig is a configuration with a canary in every slot that holds
// a secret; app is the echoing app's address.
func canaryConfig(app string) string {
	c := canaries
	return fmt.Sprintf(`admin_token: %q
log:
  level: debug
workers:
  concurrency: 4
sources:
  - name: sw
    scheme: standard-webhooks
    secrets: [%q, %q]
    forward: "http://appuser:%s@%s/echo?token=%s"
    forward_headers:
      Authorization: "Bearer %s"
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 20ms
  - name: dead
    scheme: github
    secrets: [%q]
    forward: "http://deaduser:%s@127.0.0.1:1/x?token=%s"
    forward_headers:
      Authorization: "Bearer %s"
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 20ms
  - name: st
    scheme: stripe
    secrets: [%q]
    exec: ["/bin/sh", "-c", "env; echo arg=${HB_CANARY_EXEC_ARG}; exit 3"]
    exec_env: ["API_TOKEN=%s"]
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 20ms
  - name: hm
    scheme: hmac
    header: X-Sig
    encoding: base64
    secrets: [%q]
    targets:
      - name: signed
        forward: "http://%s/echo?token=%s"
        forward_headers:
          Authorization: "Bearer %s"
        sign:
          secret: %q
          drop_sender_headers: true
      - name: envtok
        forward: "http://appuser:%s@%s/echo?access_token=${HB_CANARY_FWD_TOKEN}"
      - name: redir
        forward: "http://appuser:%s@%s/redir?token=%s"
      - name: run
        exec: ["/bin/sh", "-c", "env >&2; exit 4"]
        exec_env: ["SOME_SETTING=%s"]
      - name: args
        exec: ["/bin/sh", "-c", "echo argv: \"$@\"; exit 5; curl --api-key %s", "sh", "-u", "appuser:%s", "postgres://u:%s@127.0.0.1:1/db", "--token=%s", "--password", "%s", "https://api.example.com/x?access_token=%s", "--data", "${HB_CANARY_UNSET_ARG:-%s}"]
      - name: fwddefault
        forward: "http://%s/echo/${HB_CANARY_UNSET_FWD:-%s}"
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 20ms
  - name: tk
    scheme: token
    header: X-Token
    secrets: [%q]
    store_only: true
  - name: ba
    scheme: basic
    secrets: [%q]
    store_only: true
  - name: mg
    provider: mailgun
    secrets: [%q]
    store_only: true
`, c["admin_token"],
		whsec(c["sw_key1"]), whsec(c["sw_key2"]), c["fwd_pass"], app, c["fwd_query"], c["fwd_bearer"],
		c["github"], c["dead_pass"], c["dead_query"], c["dead_bearer"],
		c["stripe"], c["exec_env"],
		c["hmac"], app, c["target_fwd_query"], c["target_fwd_bearer"], whsec(c["sign"]), c["fwd_pass"], app, c["fwd_pass"], app, c["target_fwd_query"], c["target_exec_env_name"],
		c["arg_script_key"], c["arg_curl_user"], c["arg_url_pass"], c["arg_token_eq"], c["arg_password"], c["arg_query"], c["default_arg"],
		app, c["default_forward"],
		c["token"], c["basic"], c["mailgun"])
}

// TestCanariesNeverEmitted runs serve with a distinct canary in every
// secret slot of its configuration (signing secrets of every kind, two
// at once for rotation, the admin token, forward URLs' user info and
// query tokens, forward headers, a target's signing key, exec_env values,
// values read from the environment, ${NAME:-default} defaults used in
// their place, and credentials written literally in exec arguments) and drives it through valid,
// forged, duplicate and refused deliveries, a forward target that echoes
// its request back in a 500, one that cannot be reached, commands that
// print their environment, the admin API, the console, /metrics,
// /readyz and the CLI's read commands. No canary, in any form
// (canaryForms), may appear in the log, in any reply's headers or body,
// or in any command's output.
// On PostgreSQL the database URL holds a canary password too (the test
// server lets any password in).
func TestCanariesNeverEmitted(t *testing.T) {
	app := echoApp()
	t.Cleanup(app.Close) // after the parallel subtests
	t.Setenv("HB_CANARY_EXEC_ARG", canaries["exec_arg"])
	t.Setenv("HB_CANARY_FWD_TOKEN", canaries["env_forward_token"])
	for _, name := range []string{"HB_CANARY_UNSET_ARG", "HB_CANARY_UNSET_FWD"} {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)  // the defaults are used
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		if !strings.HasPrefix(dbURL, "sqlite:") {
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword(u.User.Username(), canaries["pg_pass"])
			dbURL = u.String()
		}
		canaryRun(t, app.Listener.Addr().String(), dbURL)
	})
}

// canaryRun is TestCanariesNeverEmitted on the database at dbURL, with
// the echoing app at app.
func canaryRun(t *testing.T, app, dbURL string) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(cfgPath, []byte(canaryConfig(app)), 0o600); err != nil {
		t.Fatal(err)
	}

	var emitted strings.Builder // everything hookbox wrote or answered
	record := func(what, text string) {
		fmt.Fprintf(&emitted, "\n=== %s\n%s", what, text)
	}
	cli := func(args ...string) string {
		out, errOut, err := runCLI(t, args...)
		text := out + errOut
		if err != nil {
			text += "\nerror: " + err.Error()
		}
		// The heading is the test's own text: the database URL it passed
		// holds a canary.
		record(strings.ReplaceAll("hookbox "+strings.Join(args, " "), dbURL, "$DB"), text)
		return text
	}

	record("config check", cli("config", "check", "--config", cfgPath))
	cli("migrate", "--db", dbURL)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, log, served := serveInProcess(t, ctx, cfgPath, dbURL)
	base := "http://" + addr
	tailOut, stopTail := startTail(t, "--db", dbURL, "--json")
	tailText, stopTail2 := startTail(t, "--db", dbURL)

	do := func(method, path string, header http.Header, body string) string {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var hs strings.Builder
		resp.Header.Write(&hs)
		record(fmt.Sprintf("%s %s → %d", method, path, resp.StatusCode), hs.String()+"\n"+string(b))
		return string(b)
	}
	admin := http.Header{"Authorization": {"Bearer " + canaries["admin_token"]}}

	// Valid deliveries, each twice (the second a duplicate).
	for _, src := range []string{"sw", "dead", "st", "hm", "tk", "ba", "mg"} {
		cli("send", "--config", cfgPath, "--source", src, "--url", base+"/webhooks/"+src, "--copies", "2", "--delivery-id", "d-"+src)
	}
	// Forged: wrong signatures, and signatures that are the secret itself.
	ts := fmt.Sprint(time.Now().Unix())
	do("POST", "/webhooks/sw", http.Header{"Webhook-Id": {"f1"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString([]byte(canaries["sw_key1"]))}}, `{"forged":1}`)
	do("POST", "/webhooks/sw", http.Header{"Webhook-Id": {"f2"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {whsec(canaries["sw_key2"])}}, `{"forged":2}`)
	do("POST", "/webhooks/dead", http.Header{"X-Github-Delivery": {"f3"}, "X-Hub-Signature-256": {"sha256=" + canaries["github"]}}, `{"forged":3}`)
	do("POST", "/webhooks/st", http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + canaries["stripe"]}}, `{"id":"evt_forged"}`)
	do("POST", "/webhooks/hm", http.Header{"X-Sig": {canaries["hmac"]}}, `{"forged":5}`)
	do("POST", "/webhooks/tk", http.Header{"X-Token": {canaries["token"] + "x"}}, `{"forged":6}`)
	do("POST", "/webhooks/tk", http.Header{"X-Token": {canaries["admin_token"]}}, `{"forged":7}`)
	do("POST", "/webhooks/ba", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(canaries["basic"]+"x"))}}, `{"forged":8}`)
	// A sender's body is its own data, shown as received: no canary in it.
	do("POST", "/webhooks/mg", nil, `{"signature":{"timestamp":"`+ts+`","token":"a-token-of-the-senders","signature":"00"}}`)
	do("POST", "/webhooks/nowhere", http.Header{"Authorization": {"Bearer " + canaries["admin_token"]}}, `{}`)
	do("GET", "/webhooks/sw", nil, "")

	// Wait until the failing targets have used up their attempts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := cli("events", "list", "--db", dbURL, "--status", "dead", "--json")
		if n := strings.Count(out, `"status": "dead"`) + strings.Count(out, `"status":"dead"`); n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing targets' events did not go dead:\n%s\n%s", out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The admin API, the console, the probes and the metrics.
	for _, p := range []string{"/admin/events", "/admin/events?status=dead", "/admin/rejected", "/admin/targets", "/metrics", "/readyz", "/healthz",
		"/ui/", "/ui/events", "/ui/dead", "/ui/rejected", "/ui/uncertain", "/ui/login"} {
		do("GET", p, admin, "")
	}
	do("GET", "/admin/events", http.Header{"Authorization": {"Bearer " + canaries["admin_token"] + "x"}}, "")
	for id := 1; id <= 20; id++ {
		do("GET", fmt.Sprintf("/admin/events/%d", id), admin, "")
		do("GET", fmt.Sprintf("/admin/events/%d?payload=raw", id), admin, "")
		do("GET", fmt.Sprintf("/ui/events/%d", id), admin, "")
		do("GET", fmt.Sprintf("/admin/rejected/%d", id), admin, "")
		do("GET", fmt.Sprintf("/ui/rejected/%d", id), admin, "")
		cli("events", "show", fmt.Sprint(id), "--db", dbURL, "--json")
		cli("events", "show", fmt.Sprint(id), "--db", dbURL)
		cli("rejected", "show", fmt.Sprint(id), "--db", dbURL)
	}
	do("POST", "/admin/rejected/recheck", admin, "")
	do("POST", "/admin/events/1/replay", admin, "")
	do("POST", "/admin/replay?status=dead&dry_run=true", admin, "")
	do("POST", "/admin/purge?days=0&include_dead=true&dry_run=true", admin, "")
	cli("rejected", "recheck", "--config", cfgPath, "--db", dbURL)
	cli("events", "list", "--db", dbURL)
	cli("events", "list", "--db", dbURL, "--json")
	cli("rejected", "list", "--db", dbURL)
	cli("rejected", "list", "--db", dbURL, "--json")
	cli("targets", "list", "--config", cfgPath, "--db", dbURL)
	cli("targets", "list", "--config", cfgPath, "--db", dbURL, "--json")
	cli("replay", "--db", dbURL, "--status", "dead", "--dry-run")

	// A console session: its cookie and CSRF token are the browser's, in
	// its replies by design, but never in the log.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := noRedirect.PostForm(base+"/ui/login", url.Values{"token": {canaries["admin_token"]}})
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	var cookie *http.Cookie
	for _, c := range login.Cookies() {
		if c.Name == "hookbox_session" {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value == "" {
		t.Fatalf("login answered %d without a session cookie", login.StatusCode)
	}
	session := http.Header{"Cookie": {cookie.String()}}
	page := do("GET", "/ui/dead", session, "")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token in the console page:\n%s", page)
	}
	form := http.Header{"Cookie": {cookie.String()}, "Content-Type": {"application/x-www-form-urlencoded"}}
	do("POST", "/ui/replay", form, url.Values{"csrf": {csrf[1]}, "status": {"dead"}}.Encode())
	do("POST", "/ui/replay", form, url.Values{"csrf": {csrf[1] + "x"}, "status": {"dead"}}.Encode())
	do("POST", "/ui/logout", form, url.Values{"csrf": {csrf[1]}}.Encode())
	do("GET", "/ui/events", session, "")

	stopTail()
	stopTail2()
	record("tail --json", tailOut.String())
	record("tail", tailText.String())
	cancel()
	if err := <-served; err != nil {
		record("serve error", err.Error())
	}
	record("serve log", log.String())

	all := emitted.String()
	for _, l := range leaks(all) {
		t.Errorf("leaked: %s", l)
	}
	for _, v := range []string{cookie.Value, csrf[1]} {
		for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '|' || r == ':' }) {
			if len(part) >= 16 && strings.Contains(log.String(), part) {
				t.Errorf("the log holds a console session's cookie or CSRF token (%q)", part)
			}
		}
	}
	// The run did what it says: every failing path was taken.
	for _, want := range []string{"attempt failed", "delivery rejected", "auth=[REDACTED] url=/echo?[REDACTED]", "auth=Basic [REDACTED] url=/echo?[REDACTED]",
		"Temporary Redirect", "connection refused", "arg=[REDACTED]", "API_TOKEN=[REDACTED]", "argv: -u appuser:[REDACTED]"} {
		if !strings.Contains(all, want) {
			t.Errorf("nothing emitted holds %q: a path was not driven", want)
		}
	}
	// HOOKBOX_CANARY_OUT=FILE keeps everything emitted, to read.
	if keep := os.Getenv("HOOKBOX_CANARY_OUT"); keep != "" {
		if err := os.WriteFile(keep+"."+filepath.Base(t.Name()), []byte(all), 0o600); err != nil {
			t.Error(err)
		}
	}
}

// TestCanariesNotInFailures: the commands that fail, at start or on their
// database, say why without a canary: configurations refused at load
// with a canary inside the refused value (a whsec_ secret that is not
// base64, a forward URL that does not parse, with a token in its query,
// a signing key that is no whsec_ key, a header value with a line
// break), run through config check and serve; and PostgreSQL URLs with a
// canary password (and sslpassword) that reach no server, or a server
// without the database, run through serve, migrate, events, rejected,
// replay and purge.
func TestCanariesNotInFailures(t *testing.T) {
	c := canaries
	var emitted strings.Builder
	run := func(args ...string) {
		// A serve that starts after all is stopped at its listening line.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		log := &startedLog{cancel: cancel}
		root := newRootCmd()
		root.SetOut(log)
		root.SetErr(log)
		root.SetArgs(args)
		err := root.ExecuteContext(ctx)
		fmt.Fprintf(&emitted, "\n=== %s #%d\n%s", args[0], emitted.Len(), log)
		if err == nil {
			t.Errorf("hookbox %s succeeded; want it refused:\n%s", args[0], log)
			return
		}
		fmt.Fprintf(&emitted, "error: %v\n", err)
	}
	badConfigs := []string{
		fmt.Sprintf("sources:\n  - name: a\n    scheme: standard-webhooks\n    secrets: [\"whsec_%s!!\"]\n    store_only: true\n", c["sw_key1"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    forward: \"http://appuser:%s@[::1/x?token=%s\"\n", c["github"], c["fwd_pass"], c["fwd_query"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    forward: \"http://appuser:%s@127.0.0.1:1 /x?token=%s\"\n", c["github"], c["fwd_pass"], c["fwd_query"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    forward: \"ftp://appuser:%s@127.0.0.1/x?token=%s\"\n", c["github"], c["fwd_pass"], c["fwd_query"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    targets:\n      - name: t\n        forward: \"http://127.0.0.1:1/x\"\n        sign:\n          secret: \"whsec_%s!!\"\n", c["github"], c["sign"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    forward: \"http://127.0.0.1:1/x\"\n    forward_headers:\n      Authorization: \"Bearer %s\\r\\nX-Other: 1\"\n", c["github"], c["fwd_bearer"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [\" %s\"]\n    store_only: true\n", c["github"]),
		fmt.Sprintf("admin_token: \"%s \"\nsources:\n  - name: a\n    scheme: none\n    store_only: true\n", c["admin_token"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: hmac\n    header: X-Sig\n    encoding: base65\n    secrets: [%q]\n    store_only: true\n", c["hmac"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    exec: [\"/bin/true\"]\n    exec_env: [\"=%s\", \"BAD NAME=%s\"]\n", c["github"], c["exec_env"], c["exec_env"]),
		fmt.Sprintf("db: \"postgres://u:%s@127.0.0.1:1/db?sslmode=disable\"\nsources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    store_only: true\n    unknown_key: 1\n", c["pg_pass"], c["github"]),
		fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: %q\n    store_only: true\n", c["github"]),
	}
	dir := t.TempDir()
	for i, doc := range badConfigs {
		path := filepath.Join(dir, fmt.Sprintf("bad%d.yaml", i))
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		run("config", "check", "--config", path)
		run("serve", "--config", path, "--db", "sqlite:"+filepath.Join(dir, "h.db"), "--listen", "127.0.0.1:0")
	}

	dbs := []string{
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?sslmode=disable&sslpassword=%s", c["pg_pass"], c["admin_token"]),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?sslmode=disable", url.QueryEscape(c["pg_pass"]+"#?%")),
		fmt.Sprintf("host=127.0.0.1 port=1 user=u password=%s dbname=db sslmode=disable", c["pg_pass"]),
		// Refused by pgx's parser, whose errors quote the URL.
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?sslmode=bogus&sslpassword=%s", c["pg_pass"], c["admin_token"]),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?connect_timeout=abc&sslpassword=%s", c["pg_pass"], c["admin_token"]),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:port/db?sslpassword=%s", c["pg_pass"], c["admin_token"]),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem&sslpassword=%s", c["pg_pass"], c["admin_token"]),
	}
	if base := os.Getenv("HOOKBOX_TEST_POSTGRES"); base != "" {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), c["pg_pass"])
		u.Path = "/hookbox_no_such_database"
		dbs = append(dbs, u.String())
	}
	cfgPath := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("sources:\n  - name: a\n    scheme: github\n    secrets: [%q]\n    store_only: true\n", c["github"])), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		run("serve", "--config", cfgPath, "--db", db, "--listen", "127.0.0.1:0")
		run("migrate", "--db", db)
		run("events", "list", "--db", db)
		run("events", "show", "1", "--db", db, "--json")
		run("rejected", "list", "--db", db, "--json")
		run("replay", "--db", db, "--status", "dead")
		run("purge", "--db", db, "--days", "1")
	}

	all := emitted.String()
	for _, l := range leaks(all) {
		t.Errorf("leaked: %s", l)
	}
	if keep := os.Getenv("HOOKBOX_CANARY_OUT"); keep != "" {
		if err := os.WriteFile(keep+".failures", []byte(all), 0o600); err != nil {
			t.Error(err)
		}
	}
}

// relay is a TCP relay to addr that can be cut: its listener closed and
// every connection through it closed, as when the database's host goes
// away.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newRelay(t *testing.T, addr string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(r.cut)
	return r
}

func (r *relay) cut() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// TestCanariesWhenPostgresFails: serve on PostgreSQL, whose URL holds a
// canary password, and whose server goes away while deliveries arrive:
// the 503s, /readyz and the log lines about the failing store hold no
// canary.
func TestCanariesWhenPostgresFails(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, u.Host)
	u.Host = r.ln.Addr().String()
	u.User = url.UserPassword(u.User.Username(), canaries["pg_pass"])
	dbURL := u.String()
	cfgPath := writeConfig(t, fmt.Sprintf("admin_token: %q\nsources:\n  - name: gh\n    scheme: github\n    secrets: [%q]\n    store_only: true\n",
		canaries["admin_token"], canaries["github"]))
	mustCLI(t, "migrate", "--db", dbURL)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, log, served := serveInProcess(t, ctx, cfgPath, dbURL)
	var emitted strings.Builder
	send := func(id string) int {
		out, errOut, _ := runCLI(t, "send", "--config", cfgPath, "--source", "gh", "--url", "http://"+addr+"/webhooks/gh", "--delivery-id", id, "--json")
		emitted.WriteString(out + errOut)
		switch {
		case strings.Contains(out, `"status": 202`):
			return 202
		case strings.Contains(out, `"status": 503`):
			return 503
		}
		return 0
	}
	get := func(path string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+canaries["admin_token"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var hs strings.Builder
		resp.Header.Write(&hs)
		fmt.Fprintf(&emitted, "\n=== GET %s → %d\n%s\n%s", path, resp.StatusCode, hs.String(), b)
		return resp.StatusCode
	}
	if got := send("before"); got != 202 {
		t.Fatalf("a delivery before the cut was answered %d, want 202:\n%s", got, emitted.String())
	}
	r.cut()
	for i := 0; send(fmt.Sprint("after-", i)) != 503; i++ {
		if i == 50 {
			t.Fatalf("no 503 after the database went away:\n%s\n%s", emitted.String(), log)
		}
	}
	for i := 0; get("/readyz") != http.StatusServiceUnavailable; i++ {
		if i == 200 {
			t.Fatalf("/readyz never answered 503 once the database went away:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	get("/admin/events")
	get("/metrics")
	cancel()
	if err := <-served; err != nil {
		fmt.Fprintf(&emitted, "serve: %v\n", err)
	}
	all := emitted.String() + "\n=== serve log\n" + log.String()
	if !strings.Contains(log.String(), "level=WARN") && !strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("the log says nothing of the failing store:\n%s", log)
	}
	for _, l := range leaks(all) {
		t.Errorf("leaked: %s", l)
	}
	if keep := os.Getenv("HOOKBOX_CANARY_OUT"); keep != "" {
		os.WriteFile(keep+".pgfail", []byte(all), 0o600)
	}
}
