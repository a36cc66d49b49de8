package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestBackupPgDumpHidesQueryPassword: a PostgreSQL URL may carry its
// password as a query parameter (?password=, ?sslpassword=), which pgx
// and libpq both read. backup's pg_dump hint drops the userinfo password
// but printed the query's, on stderr, in cron mail and CI logs.
func TestBackupPgDumpHidesQueryPassword(t *testing.T) {
	for _, pg := range []string{
		"postgres://hookbox@db.internal:5432/hookbox?password=s3cret&sslmode=require",
		"postgres://hookbox@db.internal:5432/hookbox?sslmode=verify-full&sslpassword=s3cret",
		"postgres://hookbox@db.internal:5432/hookbox?PASSWORD=s3cret",
	} {
		code, out, errOut := runExit(t, "backup", "/backup/h.dump", "--db", pg)
		if code != exitFailure || !strings.Contains(errOut, "pg_dump --format=custom") {
			t.Fatalf("backup on PostgreSQL: exit %d, %q %q", code, out, errOut)
		}
		if strings.Contains(out+errOut, "s3cret") {
			t.Errorf("backup printed the password of %s:\n%s", pg, errOut)
		}
	}
}

// TestBackupPgDumpHidesUnescapedPassword: a password with a '#' or '/'
// the operator did not percent-encode ends the URL's authority early
// (url.Parse reads "hookbox:1234" as a host and port, and the rest of
// the password as the fragment or path): backup's pg_dump line printed
// it whole, the userinfo rule never seeing it. It now gives the line with
// "$HOOKBOX_DB".
func TestBackupPgDumpHidesUnescapedPassword(t *testing.T) {
	for _, pg := range []string{
		"postgres://hookbox:1234#tops3cret@db/hookbox",
		"postgres://hookbox:5432/tops3cret@db/hookbox",
	} {
		code, out, errOut := runExit(t, "backup", "/backup/h.dump", "--db", pg)
		if code == exitOK {
			t.Fatalf("backup on PostgreSQL: exit 0, %q %q", out, errOut)
		}
		if strings.Contains(out+errOut, "tops3cret") {
			t.Errorf("backup printed the password of %s:\n%s", pg, errOut)
		}
	}
}

// TestSendJSONEscapesReply: send prints the reply of whatever answers at
// the URL; its text form escapes what does not print, but --json wrote a
// JSON reply's C1 controls and bidi overrides raw (a plain json.Encoder,
// not writeJSONOut as every other --json).
func TestSendJSONEscapesReply(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte("{\"msg\":\"\u009b31mred \u202etxt.exe\"}"))
	}))
	defer srv.Close()
	code, out, errOut := runExit(t, "send", "--scheme", "none", "--url", srv.URL+"/webhooks/x", "--json")
	if code != exitOK {
		t.Fatalf("send: exit %d: %s %s", code, out, errOut)
	}
	for _, r := range out {
		if r >= utf8.RuneSelf && !unicode.IsPrint(r) {
			t.Errorf("send --json wrote %U raw: %q", r, out)
		}
	}
}

// TestRawBodyNotOnATerminal: rejected show --body and events show
// --payload write the body "as received", for a pipe or a file. On a
// terminal that wrote the bytes of anyone who can reach the receiver (a
// refused delivery needs no signature) raw: escape sequences that set the
// clipboard (OSC 52), the title, or hide and rewrite lines. On a terminal
// what does not print must be escaped, as everywhere else.
func TestRawBodyNotOnATerminal(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	body := []byte("{\"a\":1}\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2K\rall fine\n")
	_, err := st.AddRejections(context.Background(), []hookbox.Rejection{{Source: "polar", ReceivedAt: time.Now(), Status: 401,
		Reason: "no signature matches", Body: body, BodySize: int64(len(body)), BodyComplete: true}}, hookbox.RejectionBounds{})
	if err != nil {
		t.Fatal(err)
	}
	rjs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{})
	if err != nil || len(rjs) != 1 {
		t.Fatal(rjs, err)
	}
	evs, err := st.Ingest(context.Background(), []hookbox.Delivery{{Source: "polar", DeliveryID: "e1", Payload: body, ReceivedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rejected", "show", fmt.Sprint(rjs[0].ID), "--body"},
		{"events", "show", fmt.Sprint(evs[0].ID), "--payload"},
	} {
		root := newRootCmd()
		term := &fakeTerminal{}
		root.SetOut(term)
		root.SetErr(term)
		root.SetArgs(append(args, "--db", dbURL))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := term.String(); strings.Contains(got, "\x1b") || strings.Contains(got, "\x07") {
			t.Errorf("%v wrote escape sequences raw to a terminal: %q", args, got)
		}
		// Piped, the bytes are as received.
		if out, _, err := runCLI(t, append(args, "--db", dbURL)...); err != nil || out != string(body) {
			t.Errorf("%v piped: %q, %v", args, out, err)
		}
	}
}

// TestSendEscapesDeliveryIDFromFile: send --file takes the delivery id
// from the body for stripe (and id_field schemes), and printed it raw in
// its "POST … (…, delivery ID, …)" line: a stored payload sent again
// (events show --payload > f; send --file f) drove the terminal with
// the escape sequences its sender put in the id.
func TestSendEscapesDeliveryIDFromFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "ev.json")
	if err := os.WriteFile(file, []byte(`{"id":"evt_\u001b]0;pwned\u0007\u001b[2K","object":"event","type":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--scheme", "stripe", "--secret", "whsec_test_secret_0123456789"},
		{"--scheme", "none", "--id-field", "id"},
	} {
		code, out, errOut := runExit(t, append([]string{"send", "--url", srv.URL + "/webhooks/x", "--file", file}, args...)...)
		if code != exitOK {
			t.Fatalf("send %v: exit %d: %s %s", args, code, out, errOut)
		}
		if strings.ContainsAny(out+errOut, "\x1b\x07") {
			t.Errorf("send %v printed the delivery id raw: %q", args, errOut)
		}
	}
}
