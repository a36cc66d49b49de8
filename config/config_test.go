package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "examples", "hookbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DB != DefaultDB || len(c.Sources) < 3 || c.Sources[0].Secrets[0] == "" {
		t.Fatalf("example config = %+v", c)
	}
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"SET": "value", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cases := []struct {
		in, want, err string
		from          origin
	}{
		{"a ${SET} b", "a value b", "", origin{literal: true, fromEnv: true}},
		{"${SET}", "value", "", origin{fromEnv: true}},
		{"${UNSET:-fallback}", "fallback", "", origin{defaults: []string{"UNSET"}}},
		{"${EMPTY:-fallback}", "fallback", "", origin{defaults: []string{"EMPTY"}}},
		{"${UNSET:-}", "", "", origin{}},
		// A default is read by the rules of the text around it.
		{"${UNSET:-ab$$cd}", "ab$cd", "", origin{defaults: []string{"UNSET"}}},
		{"${UNSET:-pa$word}", "", "in a default, a $NAME without braces", origin{}},
		{"${SET:-pa$word}", "", "in a default, a $NAME without braces", origin{}}, // checked though not used
		{"${EMPTY}", "", "", origin{emptyVars: []string{"EMPTY"}}},
		{"$${SET} stays", "${SET} stays", "", origin{literal: true}},
		{"$$SET stays", "$SET stays", "", origin{literal: true}},
		{"pa$$$${SET}", "pa$$${SET}", "", origin{literal: true}}, // "$$" stays but before "{" or a name
		{"$1 $ $( $$ a$", "$1 $ $( $$ a$", "", origin{literal: true}},
		{"$SET is not expanded", "", "a $NAME without braces", origin{}},
		{"${SET:x}", "", "${NAME:-default}, with", origin{}},
		{"${SET-x}", "", "only ${NAME:-default} is read", origin{}},
		{"${SET", "", `has no closing "}"`, origin{}},
		{"${ SET }", "", "spaces inside the braces", origin{}},
		{"${1}", "", "must start with a letter", origin{}},
		{"${}", "", "names no variable", origin{}},
		{"x${SET}y$SET", "", `for a literal "$" before a name or "{", write "$$"`, origin{}},
		{`"\${SET}'`, `"\value'`, "", origin{literal: true, fromEnv: true}},
		{"${UNSET}", "", "UNSET is not set", origin{}},
		{"${UNSET} ${SET} ${OTHER}", "", "variables UNSET, OTHER are not set", origin{}},
	}
	for _, c := range cases {
		got, err := expandEnv(c.in, lookup)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got.value != c.want || !reflect.DeepEqual(got.origin, c.from) {
			t.Errorf("%q = %q %+v, %v; want %q %+v", c.in, got.value, got.origin, err, c.want, c.from)
		}
	}
}

func TestSecretsFromEnvironment(t *testing.T) {
	t.Setenv("HB_TEST_SECRET", "whsec_c2VjcmV0")
	c, err := Parse([]byte(`
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["${HB_TEST_SECRET}"]
    tolerance: 2m
    timeout: 5s
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources[0]
	if s.Secrets[0] != "whsec_c2VjcmV0" || time.Duration(s.Tolerance) != 2*time.Minute || s.Policy().Timeout != 5*time.Second {
		t.Fatalf("source = %+v", s)
	}
}

// TestErrorsNameTheKey: every invalid value is reported with its key, and
// no error repeats a secret.
func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct{ yaml, key string }{
		{`sources: []`, "sources"},
		{"sources:\n  - name: a\n    scheme: nope\n    secrets: [s3cr3t-value]", "sources[0] (a)"},
		{"sources:\n  - name: 'bad name'\n    scheme: none", "sources[0].name"},
		{"sources:\n  - name: a\n    scheme: none\n  - name: a\n    scheme: none", "sources[1].name"},
		// effect.IdempotencyKey of a send (source send:K, key X) is
		// "send:K:X", as that of a delivery "K:X" to a source named send.
		{"sources:\n  - name: send\n    scheme: none", "sources[0].name: is reserved"},
		// The stores refuse every delivery of a longer name (CheckStorable).
		{"sources:\n  - name: " + strings.Repeat("a", hookbox.MaxNameLength+1) + "\n    scheme: none", "sources[0].name: is 401 bytes long"},
		{"sources:\n  - name: a\n    scheme: none\n    targets: [{name: " + strings.Repeat("t", hookbox.MaxNameLength+1) + ", forward: 'http://x/'}]",
			"targets[0].name: is 401 bytes long"},
		{"sources:\n  - name: a\n    scheme: github\n    secrets: ['']", "secrets[0]"},
		{"sources:\n  - name: a\n    scheme: hmac\n    secrets: [s3cr3t-value]", "sources[0] (a)"},
		{"sources:\n  - name: a\n    scheme: none\n    forward: ftp://x", "sources[0] (a).forward"},
		{"sources:\n  - name: a\n    scheme: none\n    forward: http://x\n    exec: [x]", "exclusive"},
		{"sources:\n  - name: a\n    scheme: none\n    tolerance: soon", "not a duration"},
		{"sources:\n  - name: a\n    scheme: none\n    backoff_min: 1h\n    backoff_max: 1m", "backoff_min"},
		{"log:\n  format: xml\nsources:\n  - name: a\n    scheme: none", "log.format"},
		{"sqlite:\n  synchronous: maybe\nsources:\n  - name: a\n    scheme: none", "sqlite.synchronous"},
		{"sqlite:\n  busy_timeout: -1s\nsources:\n  - name: a\n    scheme: none", "sqlite.busy_timeout"},
		{"retention_days: -1\nsources:\n  - name: a\n    scheme: none", "retention_days"},
		{"listen: x\nunknown_key: 1\nsources:\n  - name: a\n    scheme: none", "unknown_key"},
		{"rejected:\n  max_count: -1\nsources:\n  - name: a\n    scheme: none", "rejected.max_count"},
		{"rejected:\n  rate: -0.5\nsources:\n  - name: a\n    scheme: none", "rejected.rate"},
		{"rejected:\n  max_age: later\nsources:\n  - name: a\n    scheme: none", "rejected.max_age"},
		{"rejected:\n  max_cuont: 5\nsources:\n  - name: a\n    scheme: none", "max_count"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil {
			t.Errorf("%q: no error", c.yaml)
			continue
		}
		if !strings.Contains(err.Error(), c.key) {
			t.Errorf("%q: error %q does not name %q", c.yaml, err, c.key)
		}
		if strings.Contains(err.Error(), "s3cr3t-value") {
			t.Errorf("%q: error repeats the secret: %q", c.yaml, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing file: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// FuzzParse: no input makes the loader panic, and whatever it accepts is
// valid by its own rules.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"sources:\n  - name: a\n    scheme: none\n",
		"listen: ':8080'\nsources:\n  - name: gh\n    scheme: github\n    secrets: [x]\n",
		"sources:\n  - name: s\n    scheme: hmac\n    header: X-Sig\n    encoding: base64\n    secrets: ['${A:-b}']\n",
		"sources: [{name: p, scheme: standard-webhooks, secrets: [whsec_c2VjcmV0], tolerance: 1m}]",
		"",
		"{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Parse(in)
		if err != nil {
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted a config that does not validate: %v", err)
		}
		if len(c.Sources) == 0 {
			t.Fatal("accepted a config without sources")
		}
	})
}

// TestNoTargetWarnings: a source with neither forward nor exec is named
// unless it says store_only: true; store_only beside a target is an error
// naming the key.
func TestNoTargetWarnings(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: bare
    scheme: none
  - name: kept
    scheme: none
    store_only: true
  - name: fwd
    scheme: none
    forward: "http://127.0.0.1:3000/hooks"
  - name: run
    scheme: none
    exec: ["true"]
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := c.NoTargetWarnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "source bare has no forward, exec or targets") || !strings.Contains(ws[0], "store_only: true") {
		t.Fatalf("NoTargetWarnings = %q, want one naming source bare and store_only", ws)
	}
	for _, w := range c.Warnings {
		if strings.Contains(w, "no forward, exec or targets") {
			t.Errorf("Parse added %q to Warnings; only serve should", w)
		}
	}
	_, err = Parse([]byte(`
sources:
  - name: both
    scheme: none
    store_only: true
    forward: "http://127.0.0.1:3000/hooks"
`))
	if err == nil || !strings.Contains(err.Error(), "sources[0] (both).store_only") {
		t.Fatalf("store_only with forward: %v; want an error naming sources[0] (both).store_only", err)
	}
}

// TestExampleSourcesSayStoreOnly: the example config's sources without a
// target say store_only, so serve starts on it without the warning.
func TestExampleSourcesSayStoreOnly(t *testing.T) {
	c, err := Load(filepath.Join("..", "examples", "hookbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ws := c.NoTargetWarnings(); len(ws) > 0 {
		t.Fatalf("examples/hookbox.yaml: %q", ws)
	}
}

// TestConsoleKeys: admin_listen and the rejected section load as written.
func TestConsoleKeys(t *testing.T) {
	c, err := Parse([]byte("admin_listen: 127.0.0.1:9090\nrejected:\n  max_count: 500\n  max_age: 24h\n  max_body_bytes: 4096\n  rate: 2.5\n  burst: 20\nsources:\n  - name: a\n    scheme: none"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Rejected
	if c.AdminListen != "127.0.0.1:9090" || r.MaxCount != 500 || time.Duration(r.MaxAge) != 24*time.Hour || r.MaxBodyBytes != 4096 || r.Rate != 2.5 || r.Burst != 20 {
		t.Errorf("loaded %q %+v", c.AdminListen, r)
	}
}

// TestMalformedReferencesRefused: a reference the loader does not read is
// an error naming the key and its line, never the literal text it used to
// become (an admin_token of "$HOOKBOX_ADMIN_TOKEN" anyone could type), and
// the message repeats nothing of the value.
func TestMalformedReferencesRefused(t *testing.T) {
	t.Setenv("HB_TEST_TOKEN", "abcdefghijklmnop1234")
	for _, ref := range []string{"$HB_TEST_TOKEN", "${HB_TEST_TOKEN:changeme}", "${HB_TEST_TOKEN-changeme}", "${HB_TEST_TOKEN", "${ HB_TEST_TOKEN }", "x$HB_TEST_TOKEN"} {
		doc := "sources:\n  - {name: a, scheme: github, secrets: [\"abcdefghijk\"], store_only: true}\nadmin_token: \"" + ref + "\"\n"
		c, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("admin_token %q: loaded as %q, want an error", ref, c.AdminToken)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "admin_token (line 3)") || !strings.Contains(msg, `write "$$"`) {
			t.Errorf("admin_token %q: error does not name the key and line or say how to write a literal $: %v", ref, err)
		}
		if strings.Contains(msg, "changeme") || strings.Contains(msg, "HB_TEST_TOKEN") {
			t.Errorf("admin_token %q: error quotes the value: %v", ref, err)
		}
	}
	// The same in a secret written in the file.
	if _, err := Parse([]byte("sources:\n  - {name: a, scheme: github, secrets: [\"$GH_SECRET\"], store_only: true}\n")); err == nil ||
		!strings.Contains(err.Error(), "sources[0].secrets[0] (line 2)") {
		t.Errorf("a bare $NAME secret: %v, want an error naming sources[0].secrets[0]", err)
	}
	// The escape still gives a literal "$".
	c, err := Parse([]byte("sources:\n  - {name: a, scheme: github, secrets: [\"pa$$word-long-enough\"], store_only: true}\n"))
	if err != nil || c.Sources[0].Secrets[0] != "pa$word-long-enough" {
		t.Errorf("$$ escape: %v", err)
	}
}

// TestTimestampUnitKey: timestamp_unit on an hmac source is s or ms;
// config load (and so config check and serve) refuses any other value,
// or the key where no signed timestamp uses it, saying what to write and
// never repeating the value; the effective config shows the default.
func TestTimestampUnitKey(t *testing.T) {
	t.Setenv("HB_TS_UNIT", "unit-from-env-4f2a")
	const webflow = "sources:\n  - name: wf\n    scheme: hmac\n    header: X-Webflow-Signature\n    secrets: [s3cr3t-value]\n    store_only: true\n"
	const signedTS = "    timestamp_header: X-Webflow-Timestamp\n    signed: \"{timestamp}:{body}\"\n"
	for _, c := range []struct{ doc, want string }{
		{webflow + signedTS + "    timestamp_unit: millis\n",
			"sources[0] (wf): timestamp_unit: must be s (unix seconds, 10 digits today; the default) or ms (unix milliseconds, 13 digits today, as Webflow sends)"},
		{webflow + signedTS + "    timestamp_unit: ${HB_TS_UNIT}\n", "sources[0] (wf): timestamp_unit: must be s"},
		{webflow + "    timestamp_unit: ms\n", "sources[0] (wf): timestamp_unit: only used with timestamp_header and {timestamp} in signed; remove it, or set those"},
		{"sources:\n  - {name: gh, scheme: github, secrets: [s3cr3t-value], timestamp_unit: ms, store_only: true}\n", "sources[0] (gh): timestamp_unit: only used by the hmac scheme"},
	} {
		_, err := Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.doc, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t-value") || strings.Contains(err.Error(), "unit-from-env-4f2a") || strings.Contains(err.Error(), "millis\"") {
			t.Errorf("%q: error repeats a value: %v", c.doc, err)
		}
	}
	for unit, want := range map[string]string{"": "s", "s": "s", "ms": "ms"} {
		doc := webflow + signedTS
		if unit != "" {
			doc += "    timestamp_unit: " + unit + "\n"
		}
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("timestamp_unit %q: %v", unit, err)
		}
		if got := c.Sources[0].Verify().TimestampUnit; got != unit {
			t.Errorf("timestamp_unit %q reaches verify as %q", unit, got)
		}
		if got := c.Effective().Sources[0].TimestampUnit; got != want {
			t.Errorf("timestamp_unit %q: effective %q, want %q", unit, got, want)
		}
	}
	// No signed timestamp, no unit shown.
	c, err := Parse([]byte(webflow))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Effective().Sources[0].TimestampUnit; got != "" {
		t.Errorf("effective timestamp_unit %q for a source that signs no timestamp", got)
	}
}
