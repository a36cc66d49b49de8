package config

import (
	"strings"
	"testing"
	"time"
)

// TestMergeSequenceFirstWins: in a merge key's list (<<: [*a, *b]) the
// maps earlier in the list override the later ones (YAML merge type:
// "Keys in mapping nodes earlier in the sequence override keys specified
// in later mapping nodes"; PyYAML, yaml.v3 and compose read it so), and
// a key written in the mapping wins over a merged one even when written
// null. The decoder applied the list last-wins, and a null written key
// kept the merged value.
func TestMergeSequenceFirstWins(t *testing.T) {
	c, err := Parse([]byte(`x-strict: &strict {max_attempts: 3, allow_ips: ["10.0.0.1"]}
x-base: &base {max_attempts: 9, scheme: none, store_only: true}
sources:
  - <<: [*strict, *base]
    name: a
  - <<: [*strict, *base]
    name: b
    allow_ips: ~
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sources[0].MaxAttempts; got != 3 {
		t.Errorf("<<: [*strict, *base]: max_attempts = %d, want 3 (the first map in the list wins)", got)
	}
	if got := c.Sources[1].AllowIPs; len(got) != 0 {
		t.Errorf("allow_ips: ~ written over a merged allow_ips: %v, want none (a key written in the mapping wins)", got)
	}
}

// TestTargetBackoffOrder: a target's backoff_min above its backoff_max is
// refused with a message naming the key, as a source's is; the worker
// would otherwise raise backoff_max to backoff_min without a word.
func TestTargetBackoffOrder(t *testing.T) {
	_, err := Parse([]byte(`sources:
  - name: s
    scheme: none
    targets:
      - name: t
        forward: "http://127.0.0.1:9/x"
        backoff_min: 10m
        backoff_max: 1m
`))
	if err == nil || !strings.Contains(err.Error(), "targets[0].backoff_min: is larger than backoff_max") {
		t.Errorf("target backoff_min 10m, backoff_max 1m: %v, want an error naming targets[0].backoff_min", err)
	}
}

// TestEffectiveBackoffMaxAsRun: Effective (what config check prints as
// "the configuration hookbox serve would run") shows the backoff_max the
// worker runs: a backoff_min above the default backoff_max (1h) with no
// backoff_max raises it to backoff_min (worker.Policy.withDefaults). It
// showed 1h, below backoff_min, which is not what runs and which the
// loader refuses when read back.
func TestEffectiveBackoffMaxAsRun(t *testing.T) {
	c, err := Parse([]byte(`sources:
  - name: s
    scheme: none
    forward: "http://127.0.0.1:9/x"
    backoff_min: 2h
  - name: u
    scheme: none
    targets:
      - name: t
        forward: "http://127.0.0.1:9/x"
        backoff_min: 3h
`))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Effective()
	if got := time.Duration(e.Sources[0].BackoffMax); got < 2*time.Hour {
		t.Errorf("source s: Effective backoff_max = %s, below its backoff_min 2h; the worker runs 2h", got)
	}
	if got := time.Duration(e.Sources[1].Targets[0].BackoffMax); got < 3*time.Hour {
		t.Errorf("target u/t: Effective backoff_max = %s, below its backoff_min 3h; the worker runs 3h", got)
	}
}

// TestEmptyForwardHeaderVariable: a forward_headers value whose ${NAME}
// variable is set to nothing (an EnvironmentFile line "APP_TOKEN=") is
// refused at load, naming the variable, as an empty source secret is:
// it was accepted, and every forward then carried an empty credential
// ("Authorization: Bearer"), refused by the app, retried for hours and
// dead. ${NAME:-} still says "empty on purpose".
func TestEmptyForwardHeaderVariable(t *testing.T) {
	t.Setenv("HB_CFGREVIEW_APP_TOKEN", "")
	for _, doc := range []string{
		`sources:
  - name: s
    scheme: none
    forward: "http://127.0.0.1:9/x"
    forward_headers: {Authorization: "Bearer ${HB_CFGREVIEW_APP_TOKEN}"}
`,
		`sources:
  - name: s
    scheme: none
    targets:
      - name: t
        forward: "http://127.0.0.1:9/x"
        forward_headers: {X-Api-Key: "${HB_CFGREVIEW_APP_TOKEN}"}
`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "HB_CFGREVIEW_APP_TOKEN is set but empty") {
			t.Errorf("forward_headers from an empty variable: %v, want an error naming HB_CFGREVIEW_APP_TOKEN\n%s", err, doc)
		}
	}
	if _, err := Parse([]byte(`sources:
  - name: s
    scheme: none
    forward: "http://127.0.0.1:9/x"
    forward_headers: {X-Opt: "${HB_CFGREVIEW_APP_TOKEN:-}"}
`)); err != nil {
		t.Errorf("${NAME:-} (empty on purpose): %v", err)
	}
}
