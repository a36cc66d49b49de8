package target

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/worker"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999999", (1 << 31) * time.Second, true}, // past a uint64: still a delay, capped
		{"9999999999", (1 << 31) * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
	}
	for _, c := range cases {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestCleanText(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 200, "plain"},
		{"  line one\r\n\tline two \x00 end\n", 200, "line one line two end"},
		{"bad \xff utf8", 200, "bad \uFFFD utf8"},
		{"ééé", 5, "éé"}, // never split a character
		{"ab cd", 3, "ab"},
		{strings.Repeat("x", 300), 200, strings.Repeat("x", 200)},
	}
	for _, c := range cases {
		if got := cleanText(c.in, c.n); got != c.want {
			t.Errorf("cleanText(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestForwardHeader(t *testing.T) {
	stored := http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Signature": {"v1,abc v1,def"},
		"X-Multi":           {"a", "b"},
		"Connection":        {"keep-alive, X-Per-Hop", "x-other-hop"},
		"X-Per-Hop":         {"drop me"},
		"X-Other-Hop":       {"drop me"},
		"Keep-Alive":        {"timeout=5"},
		"Transfer-Encoding": {"chunked"},
		"Content-Length":    {"12"},
		"Host":              {"hookbox.example"},
		"Te":                {"trailers"},
		"Idempotency-Key":   {"spoof"},
		"Hookbox-Attempt":   {"99"},
		"x-lower-case":      {"kept"},
		// Routing headers the app or its framework may trust.
		"X-Forwarded-For":          {"10.0.0.1"},
		"X-Forwarded-Host":         {"admin.internal"},
		"X-Forwarded-Proto":        {"https"},
		"X-Forwarded-Port":         {"443"},
		"X-Forwarded-Prefix":       {"/admin"},
		"X-Real-Ip":                {"127.0.0.1"},
		"X-Client-Ip":              {"127.0.0.1"},
		"True-Client-Ip":           {"127.0.0.1"},
		"Client-Ip":                {"127.0.0.1"},
		"X-Originating-Ip":         {"127.0.0.1"},
		"Cf-Connecting-Ipv6":       {"::1"},
		"Wl-Proxy-Client-Ip":       {"127.0.0.1"},
		"X-Appengine-User-Ip":      {"127.0.0.1"},
		"Forwarded":                {"for=127.0.0.1;host=admin.internal"},
		"X-Original-Url":           {"/admin/delete"},
		"X-Rewrite-Url":            {"/admin/delete"},
		"X-Http-Method-Override":   {"DELETE"},
		"X-Http-Method":            {"DELETE"},
		"X-Method-Override":        {"DELETE"},
		"X-Custom-Method-Override": {"DELETE"},
		"Content-Encoding":         {"gzip"},
		"Authorization":            {"Bearer hookbox-token"},
		"Cookie":                   {"session=1"},
		"x-forwarded-for":          {"non-canonical"},
	}
	got := ForwardHeader(stored)
	want := http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Signature": {"v1,abc v1,def"},
		"X-Multi":           {"a", "b"},
		"X-Lower-Case":      {"kept"},
	}
	if len(got) != len(want) {
		t.Fatalf("ForwardHeader = %v, want %v", got, want)
	}
	for k, v := range want {
		if strings.Join(got[k], "|") != strings.Join(v, "|") {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	got.Add("X-Multi", "c")
	if len(stored["X-Multi"]) != 2 {
		t.Error("ForwardHeader shares value slices with the stored header")
	}
}

func TestNewForwardValidates(t *testing.T) {
	const secret = "hunter2-secret-value"
	cases := []struct {
		name string
		opts ForwardOptions
		want string // substring of the error
	}{
		{"no url", ForwardOptions{}, "URL must be"},
		{"relative", ForwardOptions{URL: "/hooks"}, "URL must be"},
		{"ftp", ForwardOptions{URL: "ftp://x/?token=" + secret}, "URL must be"},
		{"header name", ForwardOptions{URL: "http://x", Headers: map[string]string{"Bad Name": secret}}, `"Bad Name" is not a valid header name`},
		{"header value", ForwardOptions{URL: "http://x", Headers: map[string]string{"X-Key": secret + "\r\nX-Evil: 1"}}, "value of X-Key contains a line break"},
		{"reserved", ForwardOptions{URL: "http://x", Headers: map[string]string{"idempotency-key": secret}}, "Idempotency-Key is set by hookbox"},
		{"hop", ForwardOptions{URL: "http://x", Headers: map[string]string{"Transfer-Encoding": "chunked"}}, "connection header"},
		// An app behind CGI, WSGI or Rack reads "_" as "-" (session 44,
		// a helper's review: they were sent beside hookbox's own).
		{"reserved with _", ForwardOptions{URL: "http://x", Headers: map[string]string{"Idempotency_Key": secret}}, "Idempotency_key is set by hookbox"},
		{"hop with _", ForwardOptions{URL: "http://x", Headers: map[string]string{"Transfer_Encoding": "chunked"}}, "connection header"},
		{"same header twice", ForwardOptions{URL: "http://x", Headers: map[string]string{"Authorization": secret, "authorization": secret + "2"}}, `"Authorization" and "authorization" name the same header`},
		{"2xx permanent", ForwardOptions{URL: "http://x", PermanentStatuses: []int{204}}, "204 is not a reply a forward fails with"},
		// Deliver retries a 101 without looking at the permanent ones.
		{"1xx permanent", ForwardOptions{URL: "http://x", PermanentStatuses: []int{101}}, "101 is not a reply a forward fails with"},
		{"bogus status", ForwardOptions{URL: "http://x", PermanentStatuses: []int{1000}}, "1000"},
		// net/http would send each of these Host values cut at the space
		// or the slash, or refuse it on every attempt.
		{"host with a space", ForwardOptions{URL: "http://x", Headers: map[string]string{"Host": "app " + secret}}, "Host must be a host name"},
		{"host with a path", ForwardOptions{URL: "http://x", Headers: map[string]string{"Host": "app/" + secret}}, "Host must be a host name"},
		{"host with userinfo", ForwardOptions{URL: "http://x", Headers: map[string]string{"host": secret + "@app"}}, "Host must be a host name"},
		{"host with a bad port", ForwardOptions{URL: "http://x", Headers: map[string]string{"Host": "app:" + secret}}, "Host must be a host name"},
		{"host with a colon", ForwardOptions{URL: "http://x", Headers: map[string]string{"Host": "app:"}}, "Host must be a host name"},
	}
	for _, c := range cases {
		_, err := NewForward(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error quotes a secret: %v", c.name, err)
		}
	}

	f, err := NewForward(ForwardOptions{URL: "https://app.example/hooks", Headers: map[string]string{"x-api-key": "k", "Host": "app.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.extra.Get("X-Api-Key") != "k" || f.host != "app.internal" || !f.permanent[410] || len(f.permanent) != 1 {
		t.Errorf("forward = %+v", f)
	}
	if f.client.CheckRedirect == nil {
		t.Error("default client follows redirects")
	}
	for _, host := range []string{"app.internal:8443", "10.0.0.5", "[fd00::5]:8080", "xn--bcher-kva.example"} {
		if f, err := NewForward(ForwardOptions{URL: "http://x", Headers: map[string]string{"Host": host}}); err != nil || f.host != host {
			t.Errorf("Host %q: %v", host, err)
		}
	}
	f, err = NewForward(ForwardOptions{URL: "http://x", PermanentStatuses: []int{}})
	if err != nil || len(f.permanent) != 0 {
		t.Errorf("empty PermanentStatuses: %v, %v; want none permanent", f.permanent, err)
	}
}

func TestNewExecValidates(t *testing.T) {
	for name, opts := range map[string]ExecOptions{
		"no argv":  {},
		"empty":    {Argv: []string{""}},
		"nul":      {Argv: []string{"x", "a\x00b"}},
		"env":      {Argv: []string{"x"}, Env: []string{"NOEQUALS"}},
		"env name": {Argv: []string{"x"}, Env: []string{"=v"}},
		"limit":    {Argv: []string{"x"}, OutputLimit: -1},
		"code 0":   {Argv: []string{"x"}, PermanentExitCodes: []int{65, 0}},
		"code 256": {Argv: []string{"x"}, PermanentExitCodes: []int{256}},
	} {
		if _, err := NewExec(opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	e, err := NewExec(ExecOptions{Argv: []string{"/bin/true"}})
	if err != nil {
		t.Skip(err) // not a Unix system
	}
	if e.limit != DefaultOutputLimit {
		t.Errorf("limit = %d", e.limit)
	}
}

func TestFromConfig(t *testing.T) {
	tg, err := FromConfig(config.Source{Name: "a", Forward: "http://127.0.0.1:3000/hooks"}, nil, nil)
	if _, ok := tg.(*Forward); !ok || err != nil {
		t.Errorf("forward: %T, %v", tg, err)
	}
	tg, err = FromConfig(config.Source{Name: "b", Exec: []string{"./deploy.sh", "--prod"}}, nil, nil)
	if e, ok := tg.(*Exec); err == nil && (!ok || e.argv[1] != "--prod") {
		t.Errorf("exec: %T, %v", tg, err)
	}
	tg, err = FromConfig(config.Source{Name: "c"}, nil, nil)
	if tg != nil || err != nil {
		t.Errorf("no target: %#v, %v; want a nil interface", tg, err)
	}
	if _, err := FromConfig(config.Source{Name: "d", Forward: "http://x", Exec: []string{"y"}}, nil, nil); err == nil {
		t.Error("forward and exec together accepted")
	}
	if _, err := FromConfig(config.Source{Name: "e", Forward: "mailto:x"}, nil, nil); err == nil || !strings.Contains(err.Error(), "source e:") {
		t.Errorf("bad forward: %v", err)
	}
}

// TestFromConfigExecEnvAndRedactor: exec_inherit_env reaches the Exec
// (off by default) and the Redactor reaches both targets.
func TestFromConfigExecEnvAndRedactor(t *testing.T) {
	cfg, err := config.Parse([]byte(`
sources:
  - name: plain
    scheme: none
    exec: ["./a.sh"]
    exec_env: ["A=1"]
  - name: inherit
    scheme: none
    exec: ["./b.sh"]
    exec_inherit_env: true
  - name: fwd
    scheme: none
    forward: "http://127.0.0.1:3000/"
`))
	if err != nil {
		t.Fatal(err)
	}
	r := redact.New("a-long-secret")
	var got []worker.Target
	for _, src := range cfg.Sources {
		tg, err := FromConfig(src, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tg)
	}
	plain, inherit, fwd := got[0].(*Exec), got[1].(*Exec), got[2].(*Forward)
	if plain.inherit || !inherit.inherit || plain.env[0] != "A=1" {
		t.Errorf("inherit: plain %v, inherit %v", plain.inherit, inherit.inherit)
	}
	if plain.red != r || inherit.red != r || fwd.red != r {
		t.Error("a target lacks the Redactor")
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{limit: 10}
	for _, s := range []string{"0123456789", "abcdefghij", "KLMNOPQRST", "uv"} {
		b.Write([]byte(s))
	}
	if got := b.String(); got != "…MNOPQRSTuv" {
		t.Errorf("tail = %q", got)
	}
	b = &tailBuffer{limit: 10}
	b.Write([]byte("ok\x00 \xff\n"))
	if got := b.String(); got != "ok \uFFFD" {
		t.Errorf("cleaned = %q", got)
	}
	// Made valid, 6 bytes (3 that are not UTF-8) take 12: cut again at
	// the front, on a rune's start, to the bytes asked for.
	b = &tailBuffer{limit: 10}
	b.Write([]byte("\xffa\xffb\xffc"))
	if got := b.Last(8); got != "…\uFFFDb\uFFFDc" {
		t.Errorf("Last(8) of invalid bytes = %q", got)
	}
	// Last never gives more than the buffer keeps.
	b = &tailBuffer{limit: 4}
	b.Write([]byte("0123456789"))
	if got := b.Last(8); got != "…6789" {
		t.Errorf("Last(8) over a limit of 4 = %q", got)
	}
}

// TestTailBufferMasksJoinedSecret: a secret written with a control byte
// inside it ("s3cr3t\x00-value-1"), which making the output safe drops,
// is masked in the tail, whole, and no part of it is shown where the cut
// falls inside it. It was masked before the byte was dropped, so not at
// all: Last(10) showed "…-value-1", and Last(40) the secret whole (the
// log line and the error mask that whole again; the part, nothing did).
// Found by FuzzExecOutputTail.
func TestTailBufferMasksJoinedSecret(t *testing.T) {
	const secret = "s3cr3t-value-1"
	for n, want := range map[int]string{10: "…[REDACTED]", 40: "ok [REDACTED]"} {
		b := &tailBuffer{limit: 64, red: redact.New(secret)}
		b.Write([]byte("ok s3cr3t\x00-value-1\n"))
		if got := b.Last(n); got != want {
			t.Errorf("Last(%d) = %q, want %q", n, got, want)
		}
	}
}
