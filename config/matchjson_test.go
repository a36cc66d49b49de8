package config

import (
	"slices"
	"testing"

	"github.com/hookbox/hookbox/routing"
)

// TestMatchYAMLScalarsRouteAsJSONText: a match value written in YAML as
// null, or as a YAML boolean spelled True, is compared as the JSON text
// the README promises ("numbers and booleans compare as their JSON
// text"; routing.Rule: "a number, boolean or null as its JSON text"): a
// target with match {deleted_at: null} gets the events whose deleted_at
// is null (it got none), and one with match {coupon: [SAVE10, null]} does
// not get an event whose coupon is the empty string (the null was read as
// "").
func TestMatchYAMLScalarsRouteAsJSONText(t *testing.T) {
	c, err := Parse([]byte(`
sources:
  - name: shop
    scheme: none
    targets:
      - {name: live, exec: ["true"], match: {deleted_at: null}}
      - {name: coupon, exec: ["true"], match: {coupon: [SAVE10, null]}}
      - {name: paid, exec: ["true"], match: {paid: True}}
`))
	if err != nil {
		t.Fatalf("config refused: %v", err)
	}
	var rules []routing.Rule
	for _, tg := range c.Sources[0].Targets {
		rules = append(rules, tg.Rule())
	}
	tab := routing.New(rules)
	for body, want := range map[string][]string{
		`{"deleted_at":null}`: {"live"},
		`{"coupon":null}`:     {"coupon"},
		`{"coupon":""}`:       nil,
		`{"paid":true}`:       {"paid"},
	} {
		var got []string
		for _, r := range tab.Routes("", "d1", nil, []byte(body)) {
			got = append(got, r.Target)
		}
		if !slices.Equal(got, want) {
			t.Errorf("body %s routed to %v, want %v", body, got, want)
		}
	}
}
