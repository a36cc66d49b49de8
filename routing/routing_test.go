package routing

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
)

func targets(rs []Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Target)
	}
	return out
}

// Route is hookbox.Route, named here for the table of cases.
type Route = struct {
	Target   string
	OrderKey string
}

func routes(t *Table, typ string, h http.Header, body string) []Route {
	var out []Route
	for _, r := range t.Routes(typ, "d1", h, []byte(body)) {
		out = append(out, Route{r.Target, r.OrderKey})
	}
	return out
}

func TestRoutes(t *testing.T) {
	tab := New([]Rule{
		{Target: "billing", Types: []string{"order.*", "invoice.paid"}},
		{Target: "deploy", Match: map[string][]string{"ref": {"refs/heads/main"}}, Headers: map[string][]string{"X-GitHub-Event": {"push"}}},
		{Target: "audit", OrderBy: "data.customer"},
		{Target: "numbers", Match: map[string][]string{"data.amount": {"100"}, "data.live": {"true"}}, OrderBy: "header:X-Key"},
	})
	push := http.Header{"X-Github-Event": {"push"}, "X-Key": {"k1"}}
	cases := []struct {
		typ  string
		h    http.Header
		body string
		want []Route
	}{
		{"order.created", nil, `{"data":{"customer":"c1"}}`, []Route{{"billing", ""}, {"audit", "c1"}}},
		{"invoice.paid", nil, `not json`, []Route{{"billing", ""}, {"audit", NoKeyPrefix + "d1"}}},
		{"push", push, `{"ref":"refs/heads/main","data":{"customer":7,"amount":100,"live":true}}`,
			[]Route{{"deploy", ""}, {"audit", "7"}, {"numbers", "k1"}}},
		{"push", push, `{"ref":"refs/heads/dev"}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"push", nil, `{"ref":"refs/heads/main"}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"order", nil, `{"data":{"customer":{"id":1}}}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"order", nil, `{"data":{"customer":null}}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"order", nil, `{"data":{"customer":[1]}}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"order", nil, `{"data":{"customer":""}}`, []Route{{"audit", NoKeyPrefix + "d1"}}},
		{"order", nil, `{"data":{"customer":"null"}}`, []Route{{"audit", "null"}}},
		{"order", nil, `{"data":{"customer":false}}`, []Route{{"audit", "false"}}},
		{"order", nil, `{"data":{"customer":1.50}}`, []Route{{"audit", "1.50"}}},
	}
	for i, c := range cases {
		if got := routes(tab, c.typ, c.h, c.body); !slices.Equal(got, c.want) {
			t.Errorf("case %d (%s): routes %v, want %v", i, c.typ, got, c.want)
		}
	}
}

// TestNullValueWaitsForNoOther: a null, object or array at the order_by
// path is no key, as a missing value is: each such delivery gets a key of
// its own, so deliveries without the value (Stripe's guest payments,
// whose customer is null) do not run one at a time, nor wait behind a
// dead one. A null still matches "null" in a match filter.
func TestNullValueWaitsForNoOther(t *testing.T) {
	tab := New([]Rule{{Target: "billing", OrderBy: "data.customer"}})
	for _, v := range []string{`null`, `{"id":"cus_1"}`, `["cus_1"]`} {
		body := []byte(`{"data":{"customer":` + v + `}}`)
		a := tab.Routes("", "evt_1", nil, body)[0].OrderKey
		b := tab.Routes("", "evt_2", nil, body)[0].OrderKey
		if a == b || a != NoKeyPrefix+"evt_1" {
			t.Errorf("customer %s: order keys %q and %q, want one of its own each", v, a, b)
		}
	}
	m := New([]Rule{{Target: "guests", Match: map[string][]string{"data.customer": {"null"}}}})
	if rs := m.Routes("", "evt_1", nil, []byte(`{"data":{"customer":null}}`)); len(rs) != 1 {
		t.Errorf("match null: routes %v", rs)
	}
}

func TestLongKeyIsHashed(t *testing.T) {
	tab := New([]Rule{{Target: "a", OrderBy: "header:X-Key"}})
	long := strings.Repeat("k", 10000)
	a := tab.Routes("", "d1", http.Header{"X-Key": {long}}, nil)
	b := tab.Routes("", "d2", http.Header{"X-Key": {long}}, nil)
	if len(a[0].OrderKey) > hookbox.MaxOrderKeyLength+10 || a[0].OrderKey != b[0].OrderKey || !strings.HasPrefix(a[0].OrderKey, "sha256:") {
		t.Errorf("long key stored as %q", a[0].OrderKey[:min(40, len(a[0].OrderKey))])
	}
}

func TestCheck(t *testing.T) {
	for _, r := range []Rule{
		{Types: []string{"["}},
		{Match: map[string][]string{"a..b": {"x"}}},
		{Match: map[string][]string{"": {"x"}}},
		{OrderBy: "header:"},
		{OrderBy: ".a"},
		{Headers: map[string][]string{"": {"x"}}},
	} {
		if r.Check() == nil {
			t.Errorf("rule %+v passed Check", r)
		}
	}
	if err := (Rule{Types: []string{"a.*"}, Match: map[string][]string{"a.0.b": {"1"}}, OrderBy: "json:a.b"}).Check(); err != nil {
		t.Error(err)
	}
}

// FuzzRoutes: any body, header and event type routes without a panic,
// every route names a configured target once at most, in order, and every
// order key is bounded.
func FuzzRoutes(f *testing.F) {
	f.Add("order.created", "k", []byte(`{"data":{"customer":"c1","items":[{"sku":"a"}]}}`))
	f.Add("", "", []byte(`[1,2,3]`))
	f.Add("x", "\x00", []byte(`{"data":null}`))
	f.Add("x", "k", []byte(`{"data":{"customer":`+strings.Repeat(`[`, 200)))
	tab := New([]Rule{
		{Target: "a", Types: []string{"order.*"}, OrderBy: "data.customer"},
		{Target: "b", Match: map[string][]string{"data.items.0.sku": {"a"}}, OrderBy: "header:X-Key"},
		{Target: "c"},
	})
	f.Fuzz(func(t *testing.T, typ, key string, body []byte) {
		rs := tab.Routes(typ, "d", http.Header{"X-Key": {key}}, body)
		names := targets(nil)
		for _, r := range rs {
			names = append(names, r.Target)
			if len(r.OrderKey) > hookbox.MaxOrderKeyLength+len("sha256:")+64 || (r.Target != "c" && r.OrderKey == "") {
				t.Fatalf("order key of %d bytes", len(r.OrderKey))
			}
		}
		if !slices.IsSortedFunc(names, func(x, y string) int { return strings.Compare(x, y) }) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("routes %v", names)
		}
		if !slices.Contains(names, "c") {
			t.Fatal("a rule without filter did not match")
		}
	})
}

// TestCheckRefusesPathsThatNeverMatch: an order_by or match path that
// lookup or the header read could never match (JSONPath, brackets, a
// space after "header:", a capital "Header:", a header in match) is
// refused with the accepted syntax and the fix, while the documented
// forms pass.
func TestCheckRefusesPathsThatNeverMatch(t *testing.T) {
	cases := []struct {
		rule Rule
		want string
	}{
		{Rule{OrderBy: "$.data.id"}, `write "data.id"`},
		{Rule{OrderBy: "json:$.data.id"}, `write "data.id"`},
		{Rule{OrderBy: "data[0].id"}, `write "data.0.id"`},
		{Rule{OrderBy: "$['data']['id']"}, `write "data.id"`},
		{Rule{OrderBy: "header: X-Id"}, `write "header:X-Id"`},
		{Rule{OrderBy: "Header:X-Id"}, `write "header:X-Id"`},
		{Rule{OrderBy: "HEADER: X-Id"}, `write "header:X-Id"`},
		{Rule{OrderBy: "header:X Id"}, "has a space"},
		{Rule{OrderBy: " data.id"}, `write "data.id"`},
		{Rule{Match: map[string][]string{"$.type": {"a"}}}, `write "type"`},
		{Rule{Match: map[string][]string{"items[0].sku": {"a"}}}, `write "items.0.sku"`},
		{Rule{Match: map[string][]string{"header:X-Id": {"a"}}}, "headers: {X-Id: VALUE}"},
		{Rule{Match: map[string][]string{"json:data.id": {"a"}}}, `write "data.id"`},
		{Rule{Headers: map[string][]string{" X-Id": {"a"}}}, `write "X-Id"`},
	}
	for _, c := range cases {
		err := c.rule.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rule %+v: Check() = %v, want an error containing %s", c.rule, err, c.want)
		}
	}
	for _, r := range []Rule{
		{OrderBy: "data.customer"},
		{OrderBy: "json:data.customer"},
		{OrderBy: "header:X-Key"},
		{OrderBy: "customer"},
		{Match: map[string][]string{"ref": {"x"}, "repository.name": {"x"}, "items.0.sku": {"x"}, "$type": {"x"}, "data.first name": {"x"}}},
		{Headers: map[string][]string{"X-GitHub-Event": {"push"}}},
	} {
		if err := r.Check(); err != nil {
			t.Errorf("rule %+v: %v", r, err)
		}
	}
}
