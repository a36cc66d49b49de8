package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// TestTargetsRetire: after a config edit removed target s/a and source
// old, serve names their waiting deliveries at start, targets list
// shows them, targets pause s/a says how to end them, and targets
// retire ends them as dead (refusing a target the config still has), so
// that a purge of dead events takes the removed source's events.
//
// Source ledger has no forward, exec or targets: its events wait for a
// Go program's handlers, as a go_handler target's do. serve named its
// waiting events as unworked and told to retire them, targets list
// --config did too, pause refused it as no target of the config, and
// retire ended its events as dead. It is now a target of the config (kind
// go) to all of them.
func TestTargetsRetire(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		d := storetest.Delivery("s", "1")
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}, {Target: "b"}}
		if _, err := st.Ingest(context.Background(), []hookbox.Delivery{d, storetest.Delivery("old", "1"), storetest.Delivery("ledger", "1")}); err != nil {
			t.Fatal(err)
		}
		doc := `sources:
  - name: s
    scheme: none
    allow_ips: ["127.0.0.1"]
    targets:
      - {name: b, forward: "http://127.0.0.1:9/b"}
  - name: ledger
    scheme: none
    allow_ips: ["127.0.0.1"]
`
		cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
		if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		log := serveLog(t, doc, "--db", dbURL)
		for _, name := range []string{"s/a", "old"} {
			if logLine(log, "level=WARN", "target="+name+" ", "pending=1", `end_them_with="hookbox --config FILE targets retire `+name+`"`) == "" {
				t.Errorf("serve did not warn about %s; log:\n%s", name, log)
			}
		}
		for _, name := range []string{"s/b", "ledger"} {
			if line := logLine(log, "target="+name+" "); line != "" {
				t.Errorf("serve warned about %s, which it or a Go program works: %s", name, line)
			}
		}

		base := []string{"--config", cfgPath, "--db", dbURL, "targets"}
		var rows []targetInfo
		if err := json.Unmarshal([]byte(mustCLI(t, append(base, "list", "--json")...)), &rows); err != nil {
			t.Fatal(err)
		}
		unworked, kind := map[string]int{}, map[string]string{}
		for _, r := range rows {
			unworked[r.Name], kind[r.Name] = r.Unworked, r.Kind
		}
		if len(rows) != 4 || unworked["s/a"] != 1 || unworked["old"] != 1 || unworked["s/b"] != 0 ||
			kind["ledger"] != "go" || unworked["ledger"] != 0 {
			t.Errorf("targets list = %+v; want s/b and ledger (go), and s/a and old with 1 unworked delivery each", rows)
		}
		if out := mustCLI(t, append(base, "list")...); !strings.Contains(out, "s/a is not a target of") ||
			!strings.Contains(out, "hookbox --config FILE targets retire s/a") {
			t.Errorf("targets list does not say what waits for s/a: %s", out)
		}
		if _, _, err := runCLI(t, append(base, "pause", "s/a")...); err == nil ||
			!strings.Contains(err.Error(), "1 unfinished delivery of s/a waits") || !strings.Contains(err.Error(), "hookbox --config FILE targets retire s/a") {
			t.Errorf("pause of the removed target: %v", err)
		}
		for _, name := range []string{"s/b", "ledger"} {
			if _, _, err := runCLI(t, append(base, "retire", name)...); err == nil || !strings.Contains(err.Error(), name+" is a target of") {
				t.Errorf("retire of configured target %s: %v", name, err)
			}
		}
		if out, _, err := runCLI(t, append(base, "pause", "ledger")...); err != nil || !strings.HasPrefix(out, "paused ledger") {
			t.Errorf("pause of a source Go handlers work: %q %v", out, err)
		}
		mustCLI(t, append(base, "resume", "ledger")...)

		var reply server.RetireReply
		if err := json.Unmarshal([]byte(mustCLI(t, append(base, "retire", "s/a", "--dry-run", "--json")...)), &reply); err != nil ||
			reply != (server.RetireReply{Name: "s/a", RetireResult: hookbox.RetireResult{Ended: 1}, DryRun: true}) {
			t.Fatalf("dry retire: %+v, %v", reply, err)
		}
		if out := mustCLI(t, append(base, "retire", "s/a")...); !strings.Contains(out, "ended 1 delivery of s/a as dead") {
			t.Errorf("retire said %q", out)
		}
		mustCLI(t, append(base, "retire", "old")...)
		// A second retire fails (TestRetireWithoutConfigNeedsYes).
		if _, _, err := runCLI(t, append(base, "retire", "old")...); err == nil || !strings.Contains(err.Error(), "nothing to retire") {
			t.Errorf("a second retire: %v", err)
		}
		var evs []hookbox.Event
		if err := json.Unmarshal([]byte(mustCLI(t, "--db", dbURL, "events", "list", "--status", "dead", "--json")), &evs); err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || !strings.Contains(evs[0].LastError, "hookbox targets retire") {
			t.Fatalf("dead events after the retires: %+v", evs)
		}
		// The retired event of old is purged with dead events once it is
		// older than the cut-off: --days 0 is now.
		for retired := time.Now(); !time.Now().After(retired.Add(2 * time.Millisecond)); {
		}
		if out := mustCLI(t, "--db", dbURL, "purge", "--days", "0", "--include-dead"); !strings.Contains(out, "1 dead events") {
			t.Errorf("purge after the retire: %s", out)
		}
	})
}
