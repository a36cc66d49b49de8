package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/redact"
)

// secretForms are the strings the package comment promises to mask for
// secret, worked out here from that list: the secret, its standard and
// URL-safe base64 (unpadded, a prefix of the padded forms), its query
// escaping, its JSON escaping (with and without the HTML-safe forms), and
// for a "whsec_" secret the same of its key.
func secretForms(secret string) []string {
	if len(secret) < redact.MinLen {
		return nil
	}
	one := func(s string) []string {
		out := []string{s, base64.RawStdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)), url.QueryEscape(s)}
		if b, err := json.Marshal(s); err == nil {
			out = append(out, string(b[1:len(b)-1]))
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(s) == nil {
			j := strings.TrimSuffix(b.String(), "\n")
			out = append(out, j[1:len(j)-1])
		}
		return out
	}
	forms := one(secret)
	if key, ok := strings.CutPrefix(secret, "whsec_"); ok && len(key) >= redact.MinLen {
		forms = append(forms, one(key)...)
	}
	var kept []string
	for _, f := range forms {
		if len(f) >= redact.MinLen {
			kept = append(kept, f)
		}
	}
	return kept
}

// maskRef is the reference: every byte of text inside an occurrence of
// a form (overlapping ones too) is covered, each run of covered bytes
// becomes one Mask, and the text from start on is returned, a run that
// crosses start taken whole.
func maskRef(text string, forms []string, start int) string {
	covered := make([]bool, len(text))
	for _, f := range forms {
		for i := 0; i+len(f) <= len(text); i++ {
			if text[i:i+len(f)] == f {
				for j := i; j < i+len(f); j++ {
					covered[j] = true
				}
			}
		}
	}
	for start > 0 && start < len(text) && covered[start] && covered[start-1] {
		start--
	}
	var b strings.Builder
	for i := start; i < len(text); i++ {
		if !covered[i] {
			b.WriteByte(text[i])
			continue
		}
		if i == start || !covered[i-1] {
			b.WriteString(redact.Mask)
		}
	}
	return b.String()
}

// FuzzRedactor gives a Redactor any secrets and any text (a log line, a
// reply an app echoed, a command's output) and checks String and Tail
// against a reference that covers every byte of every occurrence of each
// form the package promises to mask: the same text, bytes outside
// occurrences kept as they were; and, said without the reference, no
// part of the result between two masks holds a form.
func FuzzRedactor(f *testing.F) {
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "adm-7f3a9c0e5b21d4", "sig=MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw token=adm-7f3a9c0e5b21d4", uint16(20))
	f.Add("abcdefgh", "cdefghij", "xxabcdefghijxx abcdefgh", uint16(5))
	f.Add("p&ss<w>rd+1 2", "short", `{"k":"p\u0026ss\u003cw\u003erd+1 2"} q=p%26ss%3Cw%3Erd%2B1+2`, uint16(30))
	f.Add("aaaaaaaaa", "", "aaaaaaaaaaaaaaaaaaaaaaa", uint16(3))
	f.Fuzz(func(t *testing.T, secret1, secret2, text string, n uint16) {
		r := redact.New(secret1, secret2)
		forms := append(secretForms(secret1), secretForms(secret2)...)
		if (r == nil) != (len(forms) == 0) {
			t.Fatalf("New(%q, %q) = %v, but the forms are %q", secret1, secret2, r, forms)
		}
		if got, want := r.String(text), maskRef(text, forms, 0); got != want {
			t.Fatalf("String(%q) with %q:\n got %q\nwant %q", text, forms, got, want)
		}
		tail := int(n) % (len(text) + 2)
		want := maskRef(text, forms, max(len(text)-tail, 0))
		got := r.Tail(text, tail)
		if got != want {
			t.Fatalf("Tail(%q, %d) with %q:\n got %q\nwant %q", text, tail, forms, got, want)
		}
		for _, part := range strings.Split(got, redact.Mask) {
			for _, form := range forms {
				if strings.Contains(part, form) && !strings.Contains(form, redact.Mask) {
					t.Fatalf("Tail(%q, %d) shows %q: %q", text, tail, form, got)
				}
			}
		}
	})
}
