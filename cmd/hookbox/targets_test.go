package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// TestTargetsCommands: targets list shows the configured targets; pause
// keeps the pause in the database (seen by list, refused for a name the
// config does not have), resume lifts it, and a second resume says it was
// not paused.
func TestTargetsCommands(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL) // migrated
		cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
		cfg := `
sources:
  - name: shop
    scheme: none
    targets:
      - {name: billing, forward: "http://127.0.0.1:9/a", types: ["order.*"], rate: 5}
      - {name: audit, exec: [/bin/true]}
  - name: gh
    scheme: none
    forward: http://127.0.0.1:9/gh
`
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		base := []string{"--config", cfgPath, "--db", dbURL, "targets"}
		list := func() []targetInfo {
			t.Helper()
			var rows []targetInfo
			if err := json.Unmarshal([]byte(mustCLI(t, append(base, "list", "--json")...)), &rows); err != nil {
				t.Fatal(err)
			}
			return rows
		}
		rows := list()
		if len(rows) != 3 || rows[0].Name != "shop/billing" || rows[0].Filter != "types order.*" || rows[0].Controls != "rate 5/s" ||
			rows[1].Name != "shop/audit" || rows[1].Kind != "exec" || rows[2].Name != "gh" || rows[0].Paused {
			t.Fatalf("targets list = %+v", rows)
		}
		if out := mustCLI(t, append(base, "pause", "shop/billing", "--reason", "app deploy")...); !strings.Contains(out, "paused shop/billing") {
			t.Errorf("pause said %q", out)
		}
		if rows := list(); !rows[0].Paused || rows[0].Reason != "app deploy" || rows[1].Paused {
			t.Errorf("after pause: %+v", rows)
		}
		if out := mustCLI(t, append(base, "list")...); !strings.Contains(out, "(app deploy)") {
			t.Errorf("table does not show the pause: %q", out)
		}
		if _, _, err := runCLI(t, append(base, "pause", "shop/nope")...); err == nil || !strings.Contains(err.Error(), "shop/billing, shop/audit, gh") {
			t.Errorf("pause of an unknown target: %v", err)
		}
		mustCLI(t, append(base, "resume", "shop/billing")...)
		if rows := list(); rows[0].Paused {
			t.Errorf("after resume: %+v", rows)
		}
		// A second resume succeeds, saying so (TestPauseResumeSayWhatTheyDid).
		if out := mustCLI(t, append(base, "resume", "shop/billing")...); !strings.Contains(out, "shop/billing was not paused") {
			t.Errorf("a second resume said %q", out)
		}

		// events show of an event with targets lists its deliveries.
		d := storetest.Delivery("shop", "ord-1")
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "billing"}, {Target: "audit"}}
		rs, err := st.Ingest(context.Background(), []hookbox.Delivery{d})
		if err != nil {
			t.Fatal(err)
		}
		var detail server.EventDetail
		id := strconv.FormatInt(rs[0].ID, 10)
		if err := json.Unmarshal([]byte(mustCLI(t, "--db", dbURL, "events", "show", id, "--json")), &detail); err != nil {
			t.Fatal(err)
		}
		if !detail.Event.FanOut || len(detail.Deliveries) != 2 || detail.Deliveries[0].Target != "billing" || detail.Deliveries[1].Source != "shop/audit" {
			t.Errorf("events show of a fanned-out event: %+v", detail)
		}
		if out := mustCLI(t, "--db", dbURL, "events", "show", id); !strings.Contains(out, "deliveries") || !strings.Contains(out, "billing") {
			t.Errorf("events show text: %q", out)
		}

		// An event no target takes (a store_only source's) has nothing to
		// replay: events show said no filter matched and hinted at a
		// replay, which then skipped it.
		kept := storetest.Delivery("kept", "k-1")
		kept.FanOut = true
		rs, err = st.Ingest(context.Background(), []hookbox.Delivery{kept})
		if err != nil {
			t.Fatal(err)
		}
		out := mustCLI(t, "--db", dbURL, "events", "show", strconv.FormatInt(rs[0].ID, 10))
		if !strings.Contains(out, "store_only") || strings.Contains(out, "hookbox replay") {
			t.Errorf("events show of an event no target takes: %q; want it to name store_only and no replay hint", out)
		}
	})
}
