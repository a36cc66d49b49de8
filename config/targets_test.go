package config

import (
	"strings"
	"testing"
	"time"
)

const targetsYAML = `
sources:
  - name: shop
    scheme: standard-webhooks
    secrets: ["whsec_c2hvcC1zZWNyZXQtZm9yLXRoZS10ZXN0"]
    max_attempts: 7
    targets:
      - name: billing
        forward: http://127.0.0.1:9001/hooks
        types: ["order.*"]
        max_concurrency: 4
        rate: 50
        order_by: data.customer
        on_dead: skip
      - name: deploy
        exec: [/bin/true]
        match: {ref: refs/heads/main, "repository.name": [api, web]}
        headers: {X-GitHub-Event: push}
        max_attempts: 2
        circuit_after: -1
      - name: audit
        forward: http://127.0.0.1:9002/hooks
        sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM=", drop_sender_headers: true}
`

func TestTargetsParse(t *testing.T) {
	c, err := Parse([]byte(targetsYAML))
	if err != nil {
		t.Fatal(err)
	}
	ts := c.Sources[0].Targets
	if len(ts) != 3 || ts[0].Rate != 50 || ts[0].OrderBy != "data.customer" || ts[0].OnDead != "skip" {
		t.Fatalf("targets = %+v", ts)
	}
	r := ts[1].Rule()
	if got := r.Match["ref"]; len(got) != 1 || got[0] != "refs/heads/main" {
		t.Errorf("a single match value is a list of one: %v", got)
	}
	if got := r.Match["repository.name"]; len(got) != 2 {
		t.Errorf("match list: %v", got)
	}
	if p := ts[1].Policy(c.Sources[0]); p.MaxAttempts != 2 {
		t.Errorf("target max_attempts: %d", p.MaxAttempts)
	}
	if p := ts[0].Policy(c.Sources[0]); p.MaxAttempts != 7 {
		t.Errorf("source max_attempts inherited: %d", p.MaxAttempts)
	}
	if after, cool := ts[0].Circuit(c.Sources[0]); after != DefaultCircuitAfter || cool != 10*time.Second {
		t.Errorf("default circuit: %d %v", after, cool)
	}
	if after, _ := ts[1].Circuit(c.Sources[0]); after != 0 {
		t.Errorf("circuit_after -1 is off: %d", after)
	}
	if ws := c.NoTargetWarnings(); len(ws) != 0 {
		t.Errorf("a source with targets is warned about: %v", ws)
	}
}

// TestSourceCircuitKeys: a source takes circuit_after and circuit_cooldown
// for its own forward or exec, with a target's defaults (5, 10s) and
// validation, and its targets inherit them unless they set their own;
// config check shows the values serve runs.
func TestSourceCircuitKeys(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: plain
    scheme: none
    forward: http://127.0.0.1:9/h
  - name: off
    scheme: none
    exec: [/bin/true]
    circuit_after: -1
  - name: shop
    scheme: none
    circuit_after: 3
    circuit_cooldown: 1m
    targets:
      - {name: a, forward: http://127.0.0.1:9/a}
      - {name: b, forward: http://127.0.0.1:9/b, circuit_after: 7, circuit_cooldown: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources
	if after, cool := s[0].Circuit(); after != DefaultCircuitAfter || cool != DefaultCircuitCooldown {
		t.Errorf("source default circuit: %d %v, want %d %v", after, cool, DefaultCircuitAfter, DefaultCircuitCooldown)
	}
	if after, _ := s[1].Circuit(); after != 0 {
		t.Errorf("source circuit_after -1 is off: %d", after)
	}
	if after, cool := s[2].Targets[0].Circuit(s[2]); after != 3 || cool != time.Minute {
		t.Errorf("target inherits the source's circuit: %d %v, want 3 1m", after, cool)
	}
	if after, cool := s[2].Targets[1].Circuit(s[2]); after != 7 || cool != 2*time.Second {
		t.Errorf("target's own circuit: %d %v, want 7 2s", after, cool)
	}
	e := c.Effective().Sources
	if e[0].CircuitAfter != DefaultCircuitAfter || time.Duration(e[0].CircuitCooldown) != DefaultCircuitCooldown || e[1].CircuitAfter != -1 {
		t.Errorf("config check: plain %d %v, off %d", e[0].CircuitAfter, e[0].CircuitCooldown, e[1].CircuitAfter)
	}
	if e[2].Targets[0].CircuitAfter != 3 || time.Duration(e[2].Targets[0].CircuitCooldown) != time.Minute {
		t.Errorf("config check: inherited %d %v", e[2].Targets[0].CircuitAfter, e[2].Targets[0].CircuitCooldown)
	}
	if ws := strings.Join(c.Warnings, "\n"); strings.Contains(ws, "circuit") {
		t.Errorf("warnings: %v", ws)
	}
	u, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    store_only: true\n    circuit_after: 2\n"))
	if err != nil || len(u.Warnings) == 0 || !strings.Contains(strings.Join(u.Warnings, "\n"), "circuit_after or circuit_cooldown but has no forward, exec or targets") {
		t.Errorf("circuit_after on a source nothing works: warnings %v, err %v", u.Warnings, err)
	}
	for _, bad := range []struct{ keys, want string }{
		{"circuit_after: -2", ".circuit_after: must be a count of failures, or -1"},
		{"circuit_cooldown: -1s", "backoff_min, backoff_max, timeout and circuit_cooldown must not be negative"},
		{"circuit_after: x", "circuit_after"},
	} {
		_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    forward: http://127.0.0.1:9/h\n    " + bad.keys + "\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one containing %q", bad.keys, err, bad.want)
		}
	}
}

func TestTargetsErrorsNameTheKey(t *testing.T) {
	cases := []struct{ targets, want string }{
		{`[{name: a, forward: "http://x/"}, {name: a, exec: [x]}]`, "targets[1].name: is the name of targets[0] too"},
		{`[{name: a}]`, "targets[0]: needs a forward URL or an exec command"},
		{`[{name: a, forward: "http://x/", exec: [x]}]`, "forward and exec are exclusive"},
		{`[{name: "a/b", forward: "http://x/"}]`, "targets[0].name: must be letters"},
		{`[{name: a, forward: "ftp://x/"}]`, "targets[0].forward: must be an http"},
		{`[{name: a, forward: "http://x/", sign: {secret: plain}}]`, "targets[0].sign.secret: must be a Standard Webhooks secret"},
		{`[{name: a, exec: [x], sign: {secret: "whsec_aGVsbG8="}}]`, "targets[0].sign: applies to a forward only"},
		{`[{name: a, forward: "http://x/", on_dead: skip}]`, "targets[0].on_dead: applies with order_by only"},
		{`[{name: a, forward: "http://x/", rate: -1}]`, "targets[0].rate: must be positive"},
		{`[{name: a, forward: "http://x/", types: ["["]}]`, `targets[0]: types: "[" is not a valid glob`},
		{`[{name: a, forward: "http://x/", order_by: "a..b"}]`, "order_by"},
		{`[{name: a, forward: "http://x/", max_concurency: 2}]`, "max_concurrency"},
		{`[{name: a, forward: "http://x/", permanent_statuses: [410, 101]}]`, "targets[0].permanent_statuses[1]: 101 is not a reply a forward fails with"},
	}
	for _, c := range cases {
		_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    targets: " + c.targets + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("targets %s: error %v, want one containing %q", c.targets, err, c.want)
		}
	}
	_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    forward: http://x/\n    targets: [{name: a, forward: \"http://y/\"}]\n"))
	if err == nil || !strings.Contains(err.Error(), "has targets and a forward or exec of its own") {
		t.Errorf("targets and a forward: %v", err)
	}
}

// TestPermanentStatusesAForwardFailsWith: permanent_statuses lists the
// final replies a forward counts as failures, 300 to 599; a status it
// never fails with (a 2xx is done, a 1xx is never final: a 101 is
// retried before the list is read) is refused at load, naming the key,
// where a 101 used to be accepted and never applied.
func TestPermanentStatusesAForwardFailsWith(t *testing.T) {
	for _, c := range []struct{ statuses, want string }{
		{"[101]", "sources[0] (s).permanent_statuses[0]: 101 is not a reply a forward fails with"},
		{"[410, 100]", "sources[0] (s).permanent_statuses[1]: 100"},
		{"[204]", "sources[0] (s).permanent_statuses[0]: 204"},
		{"[600]", "sources[0] (s).permanent_statuses[0]: 600"},
		{"[301, 410, 422, 599]", ""},
		{"[]", ""},
	} {
		_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    forward: http://x/\n    permanent_statuses: " + c.statuses + "\n"))
		if c.want == "" && err != nil {
			t.Errorf("permanent_statuses %s: %v", c.statuses, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("permanent_statuses %s: error %v, want one containing %q", c.statuses, err, c.want)
		}
	}
}

// TestSignWarnsOverStandardWebhooksSender: a signed forward of a
// standard-webhooks source replaces the sender's webhook-* headers with
// hookbox's (the same names), so the app cannot verify the sender's
// signature even without drop_sender_headers: Parse warns, naming the
// source and target. With drop_sender_headers, or for a sender whose
// headers have other names, it does not.
func TestSignWarnsOverStandardWebhooksSender(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_c2hvcC1zZWNyZXQtZm9yLXRoZS10ZXN0"]
    targets:
      - {name: kept, forward: "http://127.0.0.1:9/a", sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="}}
      - {name: dropped, forward: "http://127.0.0.1:9/b", sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM=", drop_sender_headers: true}}
      - {name: plain, forward: "http://127.0.0.1:9/c"}
  - name: gh
    scheme: github
    secrets: ["github-secret-for-the-test"]
    targets:
      - {name: kept, forward: "http://127.0.0.1:9/d", sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="}}
  - name: clerk
    provider: clerk
    secrets: ["whsec_c2hvcC1zZWNyZXQtZm9yLXRoZS10ZXN0"]
    targets:
      - {name: kept, forward: "http://127.0.0.1:9/e", sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="}}
  - name: resend
    provider: resend
    secrets: ["whsec_c2hvcC1zZWNyZXQtZm9yLXRoZS10ZXN0"]
    targets:
      - {name: kept, forward: "http://127.0.0.1:9/f", sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, w := range c.Warnings {
		if strings.Contains(w, "sign") {
			ws = append(ws, w)
		}
	}
	if len(ws) != 1 || !strings.Contains(ws[0], "source polar, target kept: sign replaces the sender's webhook-id, webhook-timestamp and webhook-signature") ||
		!strings.Contains(ws[0], "drop_sender_headers: true") {
		t.Errorf("warnings about sign: %q, want one naming source polar, target kept (Clerk and Resend sign with svix-* names, which sign leaves alone)", ws)
	}
}

// TestPermanentStatusesOnlyWhereAForwardReadsThem: exec reads no reply
// status, so permanent_statuses on an exec source or target does nothing,
// and a config that has them loads, as it did before they were checked.
func TestPermanentStatusesOnlyWhereAForwardReadsThem(t *testing.T) {
	_, err := Parse([]byte(`
sources:
  - name: e
    scheme: none
    exec: ["true"]
    permanent_statuses: [101, 200]
  - name: t
    scheme: none
    targets:
      - {name: x, exec: ["true"], permanent_statuses: [204]}
`))
	if err != nil {
		t.Errorf("permanent_statuses on exec: %v, want it loaded", err)
	}
}

func TestSignSecretIsASecret(t *testing.T) {
	if !secretKey.MatchString("sources[0].targets[2].sign.secret") || !secretKey.MatchString("sources[1].targets[0].forward_headers.X-Token") {
		t.Error("a target's sign secret or forward header is not treated as a secret")
	}
}

// TestTargetsMasked: config check's copy masks every secret of a target
// (its signing secret, forward header values, exec_env values, forward
// URL password and query) and leaves the running config alone.
func TestTargetsMasked(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: s
    scheme: none
    targets:
      - name: a
        forward: "http://u:url-password-1@127.0.0.1:9/h?token=url-token-22"
        forward_headers: {X-Token: header-secret-333}
        sign: {secret: "whsec_aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="}
      - name: b
        exec: [/bin/true]
        exec_env: ["KEY=env-secret-4444"]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Effective().Masked()
	var b strings.Builder
	for _, tg := range m.Sources[0].Targets {
		b.WriteString(tg.Forward + " " + strings.Join(tg.ExecEnv, " ") + " ")
		for _, v := range tg.ForwardHeaders {
			b.WriteString(v + " ")
		}
		if tg.Sign != nil {
			b.WriteString(tg.Sign.Secret)
		}
	}
	for _, secret := range []string{"url-password-1", "url-token-22", "header-secret-333", "env-secret-4444", "aG9va2JveC1zaWducy1pdHMtZm9yd2FyZHM="} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("masked config shows %s", secret)
		}
	}
	if c.Sources[0].Targets[0].Sign.Secret == m.Sources[0].Targets[0].Sign.Secret ||
		c.Sources[0].Targets[0].ForwardHeaders["X-Token"] != "header-secret-333" {
		t.Error("masking changed the running config")
	}
}

// TestGoHandlerTargetWarning: hookbox serve registers no Go handlers, so
// a go_handler target is named in NoTargetWarnings (which serve logs and
// config check prints) with the queue a program must handle, while
// forward and exec targets are not; Parse itself adds no such warning.
func TestGoHandlerTargetWarning(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: shop
    scheme: none
    targets:
      - {name: app, go_handler: true}
      - {name: hook, forward: "http://127.0.0.1:9/h"}
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := c.NoTargetWarnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "source shop, target app has go_handler: true") || !strings.Contains(ws[0], `registers a handler for "shop/app"`) {
		t.Fatalf("NoTargetWarnings = %q, want one naming target app and the queue shop/app", ws)
	}
	for _, w := range c.Warnings {
		if strings.Contains(w, "go_handler") {
			t.Errorf("Parse added %q to Warnings; only serve should", w)
		}
	}
}

// TestTargetPathsThatNeverMatch: order_by and match paths that can never
// match are refused when the file is loaded, naming the key and the fix.
func TestTargetPathsThatNeverMatch(t *testing.T) {
	for _, c := range []struct{ targets, want string }{
		{`[{name: a, forward: "http://x/", order_by: "$.data.id"}]`, `targets[0]: order_by: "$.data.id" is JSONPath`},
		{`[{name: a, forward: "http://x/", order_by: "data[0].id"}]`, `write "data.0.id"`},
		{`[{name: a, forward: "http://x/", order_by: "header: X-Id"}]`, `write "header:X-Id"`},
		{`[{name: a, forward: "http://x/", order_by: "Header:X-Id"}]`, `write "header:X-Id"`},
		{`[{name: a, forward: "http://x/", match: {"$.type": [a]}}]`, `targets[0]: match: "$.type" is JSONPath`},
	} {
		_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    targets: " + c.targets + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("targets %s: error %v, want one containing %q", c.targets, err, c.want)
		}
	}
}

// TestPermanentExitCodesACommandEndsWith: permanent_exit_codes, on an
// exec source or target, lists exit codes from 1 to 255; any other
// (0 is done, and a command killed by a signal has no exit code) is
// refused at load, naming the key. On a source or target with no exec,
// nothing reads them: a warning says so.
func TestPermanentExitCodesACommandEndsWith(t *testing.T) {
	for _, c := range []struct{ codes, want string }{
		{"[0]", "sources[0] (s).permanent_exit_codes[0]: 0 is not an exit code a failed command ends with"},
		{"[65, 256]", "sources[0] (s).permanent_exit_codes[1]: 256"},
		{"[-1]", "sources[0] (s).permanent_exit_codes[0]: -1"},
		{"[1, 65, 78, 255]", ""},
		{"[]", ""},
	} {
		_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    exec: [\"true\"]\n    permanent_exit_codes: " + c.codes + "\n"))
		if c.want == "" && err != nil {
			t.Errorf("permanent_exit_codes %s: %v", c.codes, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("permanent_exit_codes %s: error %v, want one containing %q", c.codes, err, c.want)
		}
	}
	_, err := Parse([]byte("sources:\n  - name: s\n    scheme: none\n    targets: [{name: a, exec: [\"true\"], permanent_exit_codes: [65, 300]}]\n"))
	if err == nil || !strings.Contains(err.Error(), "targets[0].permanent_exit_codes[1]: 300 is not an exit code") {
		t.Errorf("a target's permanent_exit_codes [65, 300]: %v", err)
	}
	c, err := Parse([]byte(`
sources:
  - name: f
    scheme: none
    forward: http://127.0.0.1:9/
    permanent_exit_codes: [65]
  - name: t
    scheme: none
    targets:
      - {name: x, forward: "http://127.0.0.1:9/", permanent_exit_codes: [65]}
      - {name: y, exec: ["true"], permanent_exit_codes: [65]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, w := range c.Warnings {
		if strings.Contains(w, "permanent_exit_codes") {
			ws = append(ws, w)
		}
	}
	if len(ws) != 2 || !strings.Contains(ws[0], "source f sets permanent_exit_codes but has no exec command") ||
		!strings.Contains(ws[1], "source t, target x sets permanent_exit_codes") {
		t.Errorf("warnings about permanent_exit_codes: %q, want one for source f and one for target t/x", ws)
	}
}
