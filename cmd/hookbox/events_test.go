package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// runCLI runs `hookbox args…` through the real root command and returns
// stdout, stderr and the error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// mustCLI runs the command and fails the test if it fails.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("hookbox %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func cliPayload(id string) []byte {
	return []byte(fmt.Sprintf("{\"id\": %q,\n \"bytes\": \"\\u00e9\\t kept \x01 as sent\"}\r\n", id))
}

// cliSeed ingests one event per id of source and leaves it in status st,
// finished at `at`. Seed pending events of a source last: a later claim of
// the same source would take them.
func cliSeed(t *testing.T, st dbtest.Store, source, typ string, status hookbox.Status, at time.Time, ids ...string) []int64 {
	t.Helper()
	var ds []hookbox.Delivery
	for _, id := range ids {
		ds = append(ds, hookbox.Delivery{Source: source, DeliveryID: id, EventType: typ,
			Header:  http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}},
			Payload: cliPayload(id), ReceivedAt: time.Now()})
	}
	return storetest.Seed(t, st, status, at, "boom: the target said no", ds...)
}

func cliNeedOps(t *testing.T, st hookbox.Store) {
	t.Helper()
	if _, ok := st.(hookbox.Ops); !ok {
		t.Skipf("%T does not implement hookbox.Ops yet", st)
	}
}

func listIDs(t *testing.T, dbURL string, args ...string) []int64 {
	t.Helper()
	out := mustCLI(t, append([]string{"events", "list", "--db", dbURL, "--json"}, args...)...)
	var evs []hookbox.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	ids := []int64{}
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

func TestEventsList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		now := time.Now()
		done := cliSeed(t, st, "polar", "order.paid", hookbox.StatusDone, now, "msg_1", "msg_2")
		dead := cliSeed(t, st, "github", "push", hookbox.StatusDead, now, "gh-1")
		pending := cliSeed(t, st, "polar", "order.refunded", hookbox.StatusPending, now, "msg_3")

		// --json: one array of event objects with the contract's fields.
		out := mustCLI(t, "events", "list", "--db", dbURL, "--json")
		var raw []map[string]any
		if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 4 {
			t.Fatalf("--json = %q, %v", out, err)
		}
		for _, k := range []string{"id", "source", "delivery_id", "status", "event_type", "attempts", "created_at"} {
			if _, ok := raw[0][k]; !ok {
				t.Errorf("event object lacks %q", k)
			}
		}
		if raw[0]["status"] != "pending" || raw[0]["delivery_id"] != "msg_3" || raw[3]["status"] != "done" {
			t.Errorf("order or fields: %v", raw)
		}

		cases := map[string][]int64{
			"--status=done":                   {done[1], done[0]},
			"--status=dead":                   dead,
			"--source=github":                 dead,
			"--type=order.refunded":           pending,
			"--source=polar --status=pending": pending,
			"--since=24h":                     {pending[0], dead[0], done[1], done[0]},
			"--since=1d --limit=2":            {pending[0], dead[0]},
			"--until=1h":                      {},
			"--since=" + now.Add(time.Hour).UTC().Format(time.RFC3339): {},
			fmt.Sprintf("--before-id=%d", dead[0]):                     {done[1], done[0]},
		}
		for args, want := range cases {
			if got := listIDs(t, dbURL, strings.Fields(args)...); !slices.Equal(got, want) {
				t.Errorf("list %s = %v, want %v", args, got, want)
			}
		}

		table := mustCLI(t, "events", "list", "--db", dbURL)
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "DELIVERY ID") {
			t.Fatalf("table:\n%s", table)
		}
		if f := strings.Fields(lines[1]); f[0] != fmt.Sprint(pending[0]) || f[1] != "polar" || f[2] != "pending" || f[len(f)-1] != "msg_3" {
			t.Errorf("row %q", lines[1])
		}
		if out := mustCLI(t, "events", "list", "--db", dbURL, "--limit", "1"); !strings.Contains(out, "--before-id") {
			t.Errorf("a full page does not say how to get the next:\n%s", out)
		}
		if out := mustCLI(t, "events", "list", "--db", dbURL, "--source", "nobody"); !strings.Contains(out, "no events") {
			t.Errorf("empty table: %q", out)
		}
		if out := mustCLI(t, "events", "list", "--db", dbURL, "--source", "nobody", "--json"); strings.TrimSpace(out) != "[]" {
			t.Errorf("empty --json: %q", out)
		}
		for _, bad := range [][]string{{"--status", "bogus"}, {"--since", "yesterday"}, {"--limit", "0"}, {"--until", "-3h"}} {
			if _, _, err := runCLI(t, append([]string{"events", "list", "--db", dbURL}, bad...)...); err == nil {
				t.Errorf("list %v accepted", bad)
			}
		}
	})
}

// TestEventsListDBFromEnvAndConfig: HOOKBOX_DB and --config's db select the
// database like --db.
func TestEventsListDBFromEnvAndConfig(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	cliSeed(t, st, "polar", "t", hookbox.StatusPending, time.Now(), "from-env")

	cfg := filepath.Join(t.TempDir(), "hookbox.yaml")
	os.WriteFile(cfg, []byte("db: \""+dbURL+"\"\nsources:\n  - name: polar\n    scheme: none\n"), 0o600)
	if out := mustCLI(t, "events", "list", "--config", cfg); !strings.Contains(out, "from-env") {
		t.Errorf("--config db not used: %q", out)
	}
	t.Setenv("HOOKBOX_DB", dbURL)
	if out := mustCLI(t, "events", "list"); !strings.Contains(out, "from-env") {
		t.Errorf("HOOKBOX_DB not used: %q", out)
	}
}

func TestEventsShow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		dead := cliSeed(t, st, "github", "push", hookbox.StatusDead, time.Now(), "gh-7")
		id := fmt.Sprint(dead[0])

		// --payload: the bytes exactly as received, nothing else.
		if out := mustCLI(t, "events", "show", id, "--db", dbURL, "--payload"); out != string(cliPayload("gh-7")) {
			t.Errorf("--payload = %q, want %q", out, cliPayload("gh-7"))
		}

		out := mustCLI(t, "events", "show", id, "--db", dbURL, "--json")
		var d server.EventDetail
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("--json %q: %v", out, err)
		}
		if d.Event.ID != dead[0] || d.Event.Status != hookbox.StatusDead || !bytes.Equal(d.Payload, cliPayload("gh-7")) {
			t.Errorf("--json detail = %+v", d)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].Outcome != "dead" || d.Attempts[0].Error != "boom: the target said no" {
			t.Errorf("--json attempts = %+v", d.Attempts)
		}

		text := mustCLI(t, "events", "show", id, "--db", dbURL)
		for _, want := range []string{"gh-7", "dead", "push", "Webhook-Id: gh-7", "attempts", "boom: the target said no", "--payload"} {
			if !strings.Contains(text, want) {
				t.Errorf("show lacks %q:\n%s", want, text)
			}
		}
		if _, _, err := runCLI(t, "events", "show", "99999", "--db", dbURL); err == nil || !strings.Contains(err.Error(), "no event") {
			t.Errorf("missing event: %v", err)
		}
		if _, _, err := runCLI(t, "events", "show", "x", "--db", dbURL); err == nil {
			t.Errorf("bad id accepted")
		}

		// A cleared payload is said so, not printed as empty.
		if ops, ok := any(st).(hookbox.Ops); ok {
			done := cliSeed(t, st, "old", "t", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "o1")
			if _, err := ops.ClearPayloads(context.Background(), time.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := runCLI(t, "events", "show", fmt.Sprint(done[0]), "--db", dbURL, "--payload"); err == nil || !strings.Contains(err.Error(), "cleared") {
				t.Errorf("cleared payload: %v", err)
			}
		}
	})
}

func TestOpsCommandsHaveHelp(t *testing.T) {
	for _, args := range [][]string{{"events", "--help"}, {"events", "list", "--help"}, {"events", "show", "--help"},
		{"replay", "--help"}, {"purge", "--help"}} {
		out := mustCLI(t, args...)
		if !strings.Contains(out, "Usage:") {
			t.Errorf("%v: %q", args, out)
		}
		if len(args) == 3 || args[0] != "events" {
			if !strings.Contains(out, "Examples:") {
				t.Errorf("%v has no examples", args)
			}
		}
	}
	// The commands of the backup and restore procedure show the lines
	// docs/deploy.md gives, under a heading that is not empty.
	for _, c := range []struct{ cmd, want string }{
		{"backup", "  hookbox backup /backup/hookbox-$(date +%F).db --db sqlite:/var/lib/hookbox/hookbox.db\n"},
		{"restore-ids", "  hookbox restore-ids --db sqlite:/var/lib/hookbox/hookbox.db\n"},
	} {
		if out := mustCLI(t, c.cmd, "--help"); !strings.Contains(out, "Examples:\n"+c.want) {
			t.Errorf("%s --help: no example %q under Examples:\n%s", c.cmd, c.want, out)
		}
	}
	for _, args := range [][]string{{"events", "list", "--help"}, {"replay", "--help"}, {"purge", "--help"}} {
		if out := mustCLI(t, args...); !strings.Contains(out, "--json") {
			t.Errorf("%v has no --json", args)
		}
	}
}

// TestFiltersRefuseUnstorableText: --source and --type that are not valid
// UTF-8 or hold a NUL byte are usage errors naming the flag, on both stores.
func TestFiltersRefuseUnstorableText(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		dead := cliSeed(t, st, "polar", "t", hookbox.StatusDead, time.Now(), "1")
		cases := [][]string{
			{"events", "list", "--source", "\xff"},
			{"events", "list", "--type", "a\x00b"},
			{"replay", "--status", "dead", "--source", "pol\xc3"},
			{"replay", "--status", "dead", "--type", "\x00", "--dry-run"},
		}
		for _, args := range cases {
			flag := args[len(args)-2]
			if flag == "--dry-run" || strings.HasPrefix(flag, "\x00") {
				flag = args[len(args)-3]
			}
			_, _, err := runCLI(t, append(args, "--db", dbURL)...)
			if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "UTF-8") {
				t.Errorf("%q: err = %v, want a usage error naming %s", args, err, flag)
			}
		}
		if e, err := st.Event(context.Background(), dead[0]); err != nil || e.Status != hookbox.StatusDead {
			t.Errorf("event after refused replays: %+v, %v", e, err)
		}
	})
}

// TestReadCommandsCreateNothing: events list/show, replay and purge given a
// database without hookbox's schema (a mistyped SQLite path, a shared
// PostgreSQL schema) say so and what to run, and create nothing: no file,
// no tables. After hookbox migrate they work.
func TestReadCommandsCreateNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		path, isSQLite := strings.CutPrefix(dbURL, "sqlite:")
		for _, args := range [][]string{
			{"events", "list"},
			{"events", "list", "--json"},
			{"events", "show", "1"},
			{"replay", "1", "--dry-run"},
			{"replay", "--status", "dead", "--dry-run"},
			{"replay", "1"},
			{"purge", "--days", "30", "--dry-run"},
			{"purge", "--days", "30"},
		} {
			out, _, err := runCLI(t, append(args, "--db", dbURL)...)
			if err == nil || !strings.Contains(err.Error(), "no hookbox database") || !strings.Contains(err.Error(), "hookbox migrate") {
				t.Errorf("%v: err %v, output %q; want an error saying there is no hookbox database and to run hookbox migrate", args, err, out)
			}
		}
		if isSQLite {
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("a read command created the database file: %v", err)
			}
		} else {
			st, err := postgresTables(dbURL)
			if err != nil || st != 0 {
				t.Fatalf("a read command created %d tables in the shared schema (%v)", st, err)
			}
		}
		if out := mustCLI(t, "migrate", "--db", dbURL); !strings.Contains(out, "created the schema: applied versions 1, ") {
			t.Errorf("migrate: %q", out)
		}
		if out := mustCLI(t, "events", "list", "--db", dbURL); !strings.Contains(out, "no events match") {
			t.Errorf("events list after migrate: %q", out)
		}
	})
}

// postgresTables counts the tables in the current schema of dbURL.
func postgresTables(dbURL string) (int, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n)
	return n, err
}

// TestHumanOutputEscapesControls: event types, delivery ids, headers and
// errors come from senders and targets; printed raw, their escape
// sequences would drive the operator's terminal (clear it, retitle it,
// hide text, reorder it with bidi overrides). Human output escapes control
// characters, other non-printing runes and invalid UTF-8: a header value's
// Latin-1 é, stored as sent, is shown \xe9 (it was stored, and shown, as
// U+FFFD).
func TestHumanOutputEscapesControls(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		hostile := "\x1b[2J\x1b]0;pwned\x07evil\u202etxt.exe\r\u009b"
		d := hookbox.Delivery{Source: "polar", DeliveryID: "evt_\x1b[8mhidden", EventType: "order." + hostile,
			Header:  http.Header{"X-Note": {"\x1b[31mred"}, "X-\x1b[1mKey": {"v"}, "X-Latin": {"caf\xe9"}},
			Payload: []byte("{}"), ReceivedAt: time.Now()}
		// Stores refuse invalid UTF-8 in ids and types; an error text
		// (what a target answered) can still hold it.
		ids := storetest.Seed(t, st, hookbox.StatusDead, time.Now(), "target said \x1b[0mno\r\nretry\xff\xfe", d)
		id := fmt.Sprint(ids[0])
		outputs := map[string]string{
			"events list": mustCLI(t, "events", "list", "--db", dbURL),
			"events show": mustCLI(t, "events", "show", id, "--db", dbURL),
			"replay":      mustCLI(t, "replay", "--source", "polar", "--dry-run", "--db", dbURL),
		}
		for name, out := range outputs {
			if !utf8.ValidString(out) {
				t.Errorf("%s: output is not valid UTF-8: %q", name, out)
			}
			for _, r := range out {
				if r != '\n' && !unicode.IsPrint(r) {
					t.Errorf("%s: output holds %U raw:\n%q", name, r, out)
					break
				}
			}
		}
		if !strings.Contains(outputs["events list"], `order.\x1b[2J\x1b]0;pwned\x07evil\u202etxt.exe\r\u009b`) {
			t.Errorf("events list does not show the escaped type:\n%s", outputs["events list"])
		}
		for _, want := range []string{`evt_\x1b[8mhidden`, `\x1b[31mred`, `X-\x1b[1mkey`, `X-Latin: caf\xe9`, `target said \x1b[0mno\r\nretry`} {
			if !strings.Contains(strings.ToLower(outputs["events show"]), strings.ToLower(want)) {
				t.Errorf("events show lacks %q:\n%s", want, outputs["events show"])
			}
		}
	})
}

// TestEventsMaskCredentialHeaders: events show (text and --json) and
// events list --json mask the values of signature and credential headers.
func TestEventsMaskCredentialHeaders(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		const token, sig = "glpat-the-shared-secret", "v1,c2lnbmF0dXJlLXZhbHVl"
		ids := storetest.Seed(t, st, hookbox.StatusDone, time.Now(), "", hookbox.Delivery{
			Source: "gitlab", DeliveryID: "g1", ReceivedAt: time.Now(), Payload: []byte(`{}`),
			Header: http.Header{"X-Gitlab-Token": {token}, "Webhook-Signature": {sig}, "X-Gitlab-Event": {"Push Hook"}},
		})
		id := fmt.Sprint(ids[0])
		for name, out := range map[string]string{
			"show":        mustCLI(t, "events", "show", id, "--db", dbURL),
			"show --json": mustCLI(t, "events", "show", id, "--db", dbURL, "--json"),
			"list --json": mustCLI(t, "events", "list", "--db", dbURL, "--json"),
		} {
			for _, secret := range []string{token, sig} {
				if strings.Contains(out, secret) {
					t.Errorf("events %s shows %q:\n%s", name, secret, out)
				}
			}
			if !strings.Contains(out, "Push Hook") {
				t.Errorf("events %s hides a header that carries no credential:\n%s", name, out)
			}
		}
	})
}
