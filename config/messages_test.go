package config

import (
	"strings"
	"testing"
)

// TestTabNamedInWords: a tab in the file was reported as "found character
// '<tab>'", the tab itself printed between the quotes, which no one can
// see on a terminal; it is named in words, with the line and column, for
// a tab that indents and one before a key.
func TestTabNamedInWords(t *testing.T) {
	for _, doc := range []string{
		"sources:\n\t- name: a\n    scheme: none\n",
		"sources:\n  - name: a\n  \t  scheme: none\n",
		"sources:\n  - {name: a,\tscheme: none}\n",
	} {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("%q: no error", doc)
			continue
		}
		msg := err.Error()
		if strings.ContainsRune(msg, '\t') || !strings.Contains(msg, "a tab character: YAML indents with spaces") || !strings.Contains(msg, "line ") {
			t.Errorf("%q: error %q; want the tab named in words with its line, and no tab in it", doc, msg)
		}
	}
}

// TestEmptySecretReportedOnce: an empty secret was reported twice, by
// the config ("secrets[0]: is empty") and again by verify ("secrets[0]:
// must not be empty"); it is reported once, and when it came from a
// ${NAME} whose variable is set but empty the error names the variable.
// Another secret of the source is still checked by verify.
func TestEmptySecretReportedOnce(t *testing.T) {
	t.Setenv("HB_EMPTY_SECRET", "")
	for _, c := range []struct {
		doc, want string
		variable  bool
	}{
		{"sources:\n  - name: app\n    scheme: github\n    secrets: [\"\"]\n", "sources[0] (app).secrets[0]: is empty", false},
		{"sources:\n  - name: app\n    scheme: github\n    secrets: [\"${HB_EMPTY_SECRET}\"]\n", "sources[0] (app).secrets[0]: is empty", true},
		{"sources:\n  - name: app\n    scheme: github\n    secrets: [good-secret-1234, \"${HB_EMPTY_SECRET}\"]\n", "sources[0] (app).secrets[1]: is empty", true},
	} {
		_, err := Parse([]byte(c.doc))
		if err == nil {
			t.Errorf("%q: no error", c.doc)
			continue
		}
		msg := err.Error()
		if lines := strings.Split(msg, "\n"); len(lines) != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: error %q; want one line with %q", c.doc, msg, c.want)
		}
		if strings.Contains(msg, "must not be empty") {
			t.Errorf("%q: the empty secret is reported twice: %q", c.doc, msg)
		}
		if named := strings.Contains(msg, "HB_EMPTY_SECRET is set but empty"); named != c.variable {
			t.Errorf("%q: error %q; names the empty variable: %v, want %v", c.doc, msg, named, c.variable)
		}
	}
	// The secret beside the empty one is still checked.
	_, err := Parse([]byte("sources:\n  - name: app\n    scheme: standard-webhooks\n    secrets: [\"\", \"whsec_not base64!\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "secrets[0]: is empty") || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("an empty and a malformed secret: %v; want both reported, once each", err)
	}
}

// TestExtensionKeysHoldAnchors: a top-level key starting with x- is
// ignored, so shared defaults can sit there under an anchor and sources
// take them with a merge key, as in docker compose files; it was refused
// as an unknown key, though decode.go's comment said anchors could sit
// there. Keys below the top level, and typos at it, are still refused.
func TestExtensionKeysHoldAnchors(t *testing.T) {
	c, err := Parse([]byte(`x-defaults: &defaults
  scheme: none
  max_attempts: 7
  allow_ips: ["127.0.0.1"]
x-notes: anything at all, [not decoded]
sources:
  - <<: *defaults
    name: a
    forward: http://127.0.0.1:9/a
  - <<: *defaults
    name: b
    max_attempts: 2
    forward: http://127.0.0.1:9/b
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 2 || c.Sources[0].Scheme != "none" || c.Sources[0].MaxAttempts != 7 || c.Sources[1].MaxAttempts != 2 {
		t.Errorf("sources = %+v", c.Sources)
	}
	for doc, want := range map[string]string{
		"sources:\n  - name: a\n    scheme: none\n    x-note: hi\n":                 "sources[0].x-note (line 4): unknown key",
		"x_defaults: 1\nsources:\n  - name: a\n    scheme: none\n":                  "x_defaults (line 1): unknown key",
		"x-d: &d {scheme: none, secretz: [a]}\nsources:\n  - <<: *d\n    name: a\n": "secretz",
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}
