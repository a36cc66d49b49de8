package config

import (
	"strings"
	"testing"
)

// TestNamesDifferingInCaseWarned: sources, and targets of one source,
// whose names differ only in case (Stripe, stripe, STRIPE) load, as two
// (or three) of their kind, with a warning naming both of each pair; they
// passed without a word. Targets of different sources, and names that
// differ otherwise, get none.
func TestNamesDifferingInCaseWarned(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - {name: Stripe, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - {name: stripe, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - {name: STRIPE, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - {name: stripe-2, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - name: shop
    scheme: none
    allow_ips: ["127.0.0.1"]
    targets:
      - {name: Billing, forward: "http://127.0.0.1:1/x"}
      - {name: billing, forward: "http://127.0.0.1:1/y"}
      - {name: Deploy, forward: "http://127.0.0.1:1/z"}
  - name: other
    scheme: none
    allow_ips: ["127.0.0.1"]
    targets:
      - {name: deploy, forward: "http://127.0.0.1:1/z"}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		if strings.Contains(w, "differ only in case") {
			got = append(got, w)
		}
	}
	want := []string{
		"sources[0] (Stripe) and sources[1] (stripe) have names that differ only in case",
		"sources[0] (Stripe) and sources[2] (STRIPE) have names that differ only in case",
		"source shop: targets[0] (Billing) and targets[1] (billing) have names that differ only in case",
	}
	if len(got) != len(want) {
		t.Fatalf("case warnings %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || !strings.Contains(got[i], "rename or remove one unless that is meant") {
			t.Errorf("warning %d = %q, want it to begin %q and say what to do", i, got[i], w)
		}
	}
	if len(c.Sources) != 6 {
		t.Errorf("%d sources loaded, want 6", len(c.Sources))
	}
}

// TestNamesDifferingInCaseFromEnv: a name from the environment is not
// repeated in the warning; the keys name the pair.
func TestNamesDifferingInCaseFromEnv(t *testing.T) {
	t.Setenv("HB_CASE_NAME", "Stripe")
	c, err := Parse([]byte(`
sources:
  - {name: "${HB_CASE_NAME}", scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
  - {name: stripe, scheme: none, allow_ips: ["127.0.0.1"], store_only: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range c.Warnings {
		if strings.Contains(w, "differ only in case") {
			found = true
			if !strings.HasPrefix(w, "sources[0] and sources[1] (stripe) have names") || strings.Contains(w, "Stripe") {
				t.Errorf("warning %q, want sources[0] without the name from the environment", w)
			}
		}
	}
	if !found {
		t.Errorf("no case warning: %q", c.Warnings)
	}
}
