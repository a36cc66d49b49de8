package config

import (
	"strings"
	"testing"
)

// The markers around every environment value in FuzzExpandSecrets: any
// part of a value that reaches a message brings one of them along.
const (
	secretStart = "S3CR3T"
	secretEnd   = "T3RC3S"
)

// FuzzExpandSecrets: whatever the document and whatever the environment
// values (quotes, backslashes, newlines, YAML syntax), no error and no
// warning contains an environment value. Every variable is set to a marked
// value except those named UNSET… (unset) and EMPTY… (set to ""). The check
// runs before the last-resort redaction in parse, so it proves that no
// message repeats a value in the first place. Seeds are in
// testdata/fuzz/FuzzExpandSecrets.
func FuzzExpandSecrets(f *testing.F) {
	f.Add([]byte("sources:\n  - name: a\n    scheme: github\n    secrets: ['${S}']\n"), `"quoted\back`)
	f.Fuzz(func(t *testing.T, doc []byte, value string) {
		if strings.Contains(string(doc), secretStart) || strings.Contains(string(doc), secretEnd) {
			return
		}
		secret := secretStart + value + secretEnd
		lookup := func(name string) (string, bool) {
			switch {
			case strings.HasPrefix(name, "UNSET"):
				return "", false
			case strings.HasPrefix(name, "EMPTY"):
				return "", true
			}
			return secret, true
		}
		c, _, err := parseUnredacted(doc, lookup)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, secretStart) || strings.Contains(msg, secretEnd) {
				t.Fatalf("error shows an environment value:\n%s", msg)
			}
			return
		}
		for _, w := range c.Warnings {
			if strings.Contains(w, secretStart) || strings.Contains(w, secretEnd) {
				t.Fatalf("warning shows an environment value: %s", w)
			}
		}
		for i, s := range c.Sources {
			for j, sec := range s.Secrets {
				if o := c.origins[secretPath(i, j)]; o.fromEnv && !o.literal && len(o.defaults) == 0 && !strings.Contains(sec, secret) {
					t.Fatalf("sources[%d].secrets[%d] came from the environment alone but does not hold the value", i, j)
				}
			}
		}
	})
}
