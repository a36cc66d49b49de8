package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestJSONLogEscapesSenderText: with log.format json, text a sender
// chooses (a source name asked for, a path to the admin API, a delivery
// id) reaches log lines with its C1 controls and bidi overrides written
// as JSON \u escapes, as the text format escapes them, and the lines
// decode to the text as sent; so does the JSON of events list and show,
// rejected list and show, and tail, with a sender's header. The JSON
// encoders escape only C0 controls: U+009B (a terminal's CSI) and U+202E
// (which reverses what follows it on screen) were written raw, so a
// sender, even one refused, could drive the terminal of an operator
// reading the log or a listing, or make a line read other than it is.
func TestJSONLogEscapesSenderText(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookbox.yaml")
	doc := `admin_token: "admin-token-0123456789abcdef"
log:
  level: debug
  format: json
sources:
  - name: open
    scheme: none
    id_header: X-Id
    store_only: true
`
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL := dbtest.SQLiteURL(t)
	addr, log, served := serveInProcess(t, ctx, cfgPath, dbURL)

	// Raw requests: net/http's client would escape the path's bytes.
	send := func(raw, wantStatus string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		status, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 "+wantStatus+" ") {
			t.Fatalf("answer %q, %v; want %s", status, err, wantStatus)
		}
	}
	// U+009B is %C2%9B, U+202E %E2%80%AE.
	send("POST /webhooks/x%C2%9B31m%E2%80%AEforged HTTP/1.1\r\nHost: h\r\nX-Note: \u009b2J\r\nContent-Length: 2\r\n\r\n{}", "404")
	send("GET /admin/events%C2%9B2J HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer wrong-token-0123456789\r\n\r\n", "401")
	send("POST /webhooks/open HTTP/1.1\r\nHost: h\r\nX-Id: evt\u202egnp.exe\u200b\r\nX-Note: \u009b2J\r\nContent-Length: 2\r\n\r\n{}", "202")

	for _, line := range []string{`"unknown_source":"x`, `"path":"/admin/events`, `"delivery_id":"evt`} {
		await(t, "a log line with "+line, func() bool { return strings.Contains(log.String(), line) })
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	want := map[string]string{"unknown_source": "x\u009b31m\u202eforged", "path": "/admin/events\u009b2J", "delivery_id": "evt\u202egnp.exe\u200b"}
	for i, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		noneRaw(t, "log line "+strconv.Itoa(i+1), line)
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Errorf("line %d is not JSON: %v: %q", i+1, err, line)
		}
		for k, v := range want {
			if fields[k] == v {
				delete(want, k) // decoded as it was sent
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("no line decodes to %q", want)
	}

	// What the JSON of the commands shows decodes to the text as stored,
	// with nothing that does not print written raw: they printed the
	// sender's U+009B and U+202E as they came.
	tail, interrupt := startTail(t, "--db", dbURL, "--json")
	await(t, "tail's line", func() bool { return strings.Contains(tail.String(), "\n") })
	if err := interrupt(); err != nil {
		t.Fatalf("tail: %v", err)
	}
	for _, args := range [][]string{{"events", "list", "--json"}, {"events", "show", "1", "--json"},
		{"rejected", "list", "--json"}, {"rejected", "show", "1", "--json"}, {"tail"}} {
		out := tail.String()
		if args[0] != "tail" {
			out = mustCLI(t, append(args, "--db", dbURL)...)
		}
		what := strings.Join(args, " ")
		noneRaw(t, what, out)
		n := 0
		for dec := json.NewDecoder(strings.NewReader(out)); ; {
			var v any
			if err := dec.Decode(&v); err != nil {
				break
			}
			for _, text := range []string{"\u009b2J", "evt\u202egnp.exe\u200b", "x\u009b31m\u202eforged"} {
				n += countString(v, text)
			}
		}
		if n < 2 {
			t.Errorf("%s: the sender's text decoded %d times, want at least 2 (a header and an id or a name): %s", what, n, out)
		}
	}
}

// countString counts the strings in v, decoded JSON, equal to s, and the
// header values ([]any of one string) that are.
func countString(v any, s string) int {
	n := 0
	switch v := v.(type) {
	case string:
		if v == s {
			n++
		}
	case []any:
		for _, e := range v {
			n += countString(e, s)
		}
	case map[string]any:
		for _, e := range v {
			n += countString(e, s)
		}
	}
	return n
}

// noneRaw fails t if out holds a rune past ASCII that does not print.
func noneRaw(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r >= utf8.RuneSelf && r != utf8.RuneError && !unicode.IsPrint(r) {
			t.Errorf("%s holds %U raw: %q", what, r, out)
			return
		}
	}
}
