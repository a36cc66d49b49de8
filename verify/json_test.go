package verify

import (
	"strings"
	"testing"
)

func TestJSONFields(t *testing.T) {
	deep := strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1)
	tooDeep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	cases := []struct {
		in     string
		ok     bool
		id, ty string // raw values; "-" means absent
	}{
		{`{"id":"evt_1","type":"a.b"}`, true, `"evt_1"`, `"a.b"`},
		{" \t\r\n{ \"type\" : \"x\" , \"id\" : 12 }\n", true, `12`, `"x"`},
		{`{}`, true, "-", "-"},
		{`{"a":{"id":"nested","type":"n"},"b":[{"id":1}]}`, true, "-", "-"},
		{`{"id":"first","id":"second"}`, true, `"second"`, "-"},
		{`{"\u0069d":"escaped key"}`, true, `"escaped key"`, "-"},
		{`{"i\"d":"not id"}`, true, "-", "-"},
		{`{"ID":"case matters"}`, true, "-", "-"},
		{`{"id":null,"type":true}`, true, `null`, `true`},
		{`{"id":-1.5e+10,"type":[1,2,{"x":"y"}]}`, true, `-1.5e+10`, `[1,2,{"x":"y"}]`},
		{`{"id":"caf\u00e9 ü","x":false}`, true, `"caf\u00e9 ü"`, "-"},
		{`{"d":` + deep + `,"id":"deep"}`, true, `"deep"`, "-"},
		{`{"d":` + tooDeep + `}`, false, "", ""},
		{``, false, "", ""},
		{`null`, false, "", ""},
		{`[{"id":"x"}]`, false, "", ""},
		{`"id"`, false, "", ""},
		{`{"id":"x",}`, false, "", ""},
		{`{"id":"x"} trailing`, false, "", ""},
		{`{"id":"x"}{}`, false, "", ""},
		{`{"id":"x"`, false, "", ""},
		{`{"id" "x"}`, false, "", ""},
		{`{id:"x"}`, false, "", ""},
		{`{"id":'x'}`, false, "", ""},
		{`{"id":"a` + "\n" + `b"}`, false, "", ""},
		{`{"id":"\x"}`, false, "", ""},
		{"{\"id\":\"a\x1fb\"}", false, "", ""},
		{"{\"id\":\"a\x00b\"}", false, "", ""},
		{"{\"id\":\"a\x7fb\"}", true, "\"a\x7fb\"", "-"},
		{`{"id":"\u12G4"}`, false, "", ""},
		{`{"id":01}`, false, "", ""},
		{`{"id":1.}`, false, "", ""},
		{`{"id":.5}`, false, "", ""},
		{`{"id":1e}`, false, "", ""},
		{`{"id":-}`, false, "", ""},
		{`{"id":+1}`, false, "", ""},
		{`{"id":tru}`, false, "", ""},
		{`{"id":[1,]}`, false, "", ""},
		{`{"a":{"b":1,}}`, false, "", ""},
		{"\xef\xbb\xbf{}", false, "", ""},
	}
	for _, tc := range cases {
		id, ty, ok := jsonFields([]byte(tc.in), "id", "type")
		if ok != tc.ok {
			t.Errorf("jsonFields(%.60q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		for _, c := range []struct {
			got  []byte
			want string
		}{{id, tc.id}, {ty, tc.ty}} {
			if c.want == "-" {
				if c.got != nil {
					t.Errorf("jsonFields(%.60q) found %q, want absent", tc.in, c.got)
				}
			} else if string(c.got) != c.want {
				t.Errorf("jsonFields(%.60q) = %q, want %q", tc.in, c.got, c.want)
			}
		}
	}
}

func TestJSONFieldsEmptyNameNotLookedFor(t *testing.T) {
	a, b, ok := jsonFields([]byte(`{"":"empty key"}`), "", "")
	if !ok || a != nil || b != nil {
		t.Fatalf("got %q %q %v", a, b, ok)
	}
}

func TestJSONString(t *testing.T) {
	cases := []struct {
		raw, want string
		ok        bool
	}{
		{`"plain"`, "plain", true},
		{`"tab\there \"q\" \u00e9 \ud83d\ude00"`, "tab\there \"q\" é 😀", true},
		// Nothing is lost: what is not UTF-8 stays so (and a delivery id
		// so decoded is refused), never replaced by U+FFFD.
		{`"lone \ud800"`, "lone \xed\xa0\x80", true},
		{`"lone \udc00 low"`, "lone \xed\xb0\x80 low", true},
		{`"pair first \ud800\u0041"`, "pair first \xed\xa0\x80A", true},
		{"\"bad \xff utf8\"", "bad \xff utf8", true},
		{"\"bad \xfe utf8 \\n\"", "bad \xfe utf8 \n", true},
		{`"\ufffd"`, "\uFFFD", true},
		{`""`, "", true},
		{`12`, "", false},
		{`null`, "", false},
		{``, "", false},
	}
	for _, tc := range cases {
		got, ok := jsonString([]byte(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("jsonString(%q) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
	for raw, want := range map[string]string{`123`: "123", `-0.5e3`: "-0.5e3", `"s"`: "s", `true`: "", `{}`: "", `[]`: ""} {
		if got, _ := jsonScalarText([]byte(raw)); got != want {
			t.Errorf("jsonScalarText(%q) = %q, want %q", raw, got, want)
		}
	}
}
