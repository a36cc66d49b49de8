package rejected

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
)

// FuzzRecorderClean feeds what the log keeps of a refused delivery (the
// source name asked for, the remote address, the headers and the body,
// all the sender's) to the Recorder's cleaning and checks the package's
// guarantees against the input: every text storable and bounded; the body
// a prefix of the one sent, no longer than MaxBodyBytes, complete only if
// whole; at most maxHeaderValues values kept, the others counted; a header
// the log reports unaltered (HeaderAltered) kept exactly as sent; the
// values KeptAsSent vouches for kept exactly; and a credential header
// (MarkCredentials) masked by DisplayHeader.
//
// raw holds one header a line, "name:value"; spread repeats the lines'
// values under numbered names, to pass the bound on values.
func FuzzRecorderClean(f *testing.F) {
	long := strings.Repeat("é", 300)
	f.Add("github", "203.0.113.9:4000", "X-Hub-Signature-256:sha256=00ff\nX-Github-Delivery:d1", []byte(`{"a":1}`), uint8(0), uint16(64))
	f.Add("s\x00rc\xff", "::1", "X-Token:secret-token-1\nX-Token:second\nA\xff:b\x00", []byte("body"), uint8(3), uint16(2))
	f.Add(long, long, "X-Long:"+long+"\n"+long+":v", []byte(long), uint8(70), uint16(10))
	f.Add("a", "b", "X-A:1\nx-a:2\nX-Values:\uFFFD", []byte(nil), uint8(65), uint16(0))
	f.Fuzz(func(t *testing.T, source, remote, raw string, body []byte, spread uint8, maxBody uint16) {
		r := &Recorder{opts: Options{MaxBodyBytes: int(maxBody)}, now: time.Now}
		sent := http.Header{}
		for _, line := range strings.Split(raw, "\n") {
			name, value, ok := strings.Cut(line, ":")
			if !ok || name == "" || name == credentialsHeader || name == leftOutHeader {
				continue
			}
			sent[name] = append(sent[name], value)
		}
		for i := range int(spread) {
			sent["X-Spread-"+strconv.Itoa(i)] = []string{strconv.Itoa(i)}
		}
		// The first header sent stands for a token source's credential.
		var credentials []string
		if first, _, ok := strings.Cut(raw, ":"); ok && len(sent[first]) > 0 {
			credentials = []string{first}
		}
		in := hookbox.Rejection{Source: source, RemoteAddr: remote, Reason: source + remote, Body: body, BodyComplete: true}
		in.Header = MarkCredentials(cloneHeader(sent), credentials)
		out := r.clean(in)

		for what, s := range map[string][2]string{"source": {source, out.Source}, "reason": {in.Reason, out.Reason}, "remote address": {remote, out.RemoteAddr}} {
			checkText(t, what, s[0], s[1])
		}
		keep := min(len(body), int(maxBody))
		if !bytes.Equal(out.Body, body[:keep]) {
			t.Fatalf("body kept %q, want the first %d bytes of %q", out.Body, keep, body)
		}
		if out.BodyComplete != (body != nil && keep == len(body)) {
			t.Fatalf("body of %d bytes kept %d: BodyComplete %v", len(body), len(out.Body), out.BodyComplete)
		}

		total, kept := 0, 0
		for _, vs := range sent {
			total += len(vs)
		}
		for k, vs := range out.Header {
			if k == credentialsHeader || k == leftOutHeader {
				continue
			}
			checkHeaderText(t, "header name", k)
			for _, v := range vs {
				checkHeaderText(t, "header value", v)
				kept++
			}
		}
		if kept > maxHeaderValues {
			t.Fatalf("%d header values kept, at most %d", kept, maxHeaderValues)
		}
		left := 0
		if vs := out.Header[leftOutHeader]; vs != nil {
			n, err := strconv.Atoi(vs[0])
			if err != nil || len(vs) != 1 || n <= 0 {
				t.Fatalf("left-out count %q", vs)
			}
			left = n
		}
		if kept+left != total {
			t.Fatalf("%d values sent, %d kept and %d counted as left out", total, kept, left)
		}

		if !HeaderAltered(out.Header) {
			shown := cloneHeader(out.Header)
			delete(shown, credentialsHeader)
			if !equalHeaders(shown, sent) {
				t.Fatalf("HeaderAltered says unaltered, but kept %q of %q", shown, sent)
			}
		}
		var plain []string
		for name := range sent {
			if len(name) <= maxText && hookbox.StorableText(name) && !strings.ContainsRune(name, utf8.RuneError) {
				plain = append(plain, name)
			}
		}
		if KeptAsSent(sent, plain) {
			for _, name := range plain {
				if !sameValues(out.Header[name], sent[name]) {
					t.Fatalf("KeptAsSent vouched for %q, but %q was kept of %q", name, out.Header[name], sent[name])
				}
			}
		}
		shown := DisplayHeader(out.Header)
		if _, ok := shown[credentialsHeader]; ok {
			t.Fatalf("DisplayHeader shows the credentials list")
		}
		for _, name := range credentials {
			for _, v := range shown[name] {
				if v != redact.Mask {
					t.Fatalf("credential header %q shown as %q", name, v)
				}
			}
		}
	})
}

// checkText checks that got, what the log keeps of the sender's text in,
// is storable, bounded, and in itself when that was storable and short.
func checkText(t *testing.T, what, in, got string) {
	t.Helper()
	if !hookbox.StorableText(got) || len(got) > maxText {
		t.Fatalf("%s kept as %q (%d bytes)", what, got, len(got))
	}
	if hookbox.StorableText(in) && len(in) <= maxText && got != in {
		t.Fatalf("%s %q kept as %q", what, in, got)
	}
	if hookbox.StorableText(in) && !strings.HasPrefix(in, got) {
		t.Fatalf("%s %q cut to %q, not a prefix", what, in, got)
	}
}

// checkHeaderText checks a header name or value kept: storable, and either
// within maxText or cut and marked with its length.
func checkHeaderText(t *testing.T, what, s string) {
	t.Helper()
	if !hookbox.StorableText(s) {
		t.Fatalf("%s %q is not storable", what, s)
	}
	if len(s) <= maxText {
		return
	}
	i := strings.LastIndex(s, "…(")
	ok := i >= 0
	head, mark := s[:max(i, 0)], s[max(i, 0)+len("…("):]
	n, err := strconv.Atoi(strings.TrimSuffix(mark, " bytes)"))
	if !ok || !strings.HasSuffix(mark, " bytes)") || err != nil || n <= maxText || len(head) > maxText {
		t.Fatalf("%s of %d bytes is not cut and marked: %q", what, len(s), s)
	}
}

func cloneHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		out[k] = slices.Clone(vs)
	}
	return out
}

// equalHeaders compares a and b, each name's values as a multiset.
func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if !sameValues(vs, b[k]) {
			return false
		}
	}
	return true
}

func sameValues(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
