package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// TestUnworkedTargetWarnedAndRetired: deliveries left by a target and a
// source removed from the config are named at start, once each, with
// their counts and the command that ends them, and never the ones a
// configured target works; the admin API retires them (refusing a name
// this process works), and the event whose last delivery was retired is
// then dead, no longer waiting.
func TestUnworkedTargetWarnedAndRetired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		t.Cleanup(app.Close)
		st := dbtest.Open(t, dbURL)
		// Stored by a process whose config had target s/a and source old.
		d := storetest.Delivery("s", "1")
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}, {Target: "b"}}
		rs, err := st.Ingest(context.Background(), []hookbox.Delivery{d, storetest.Delivery("old", "1"), storetest.Delivery("old", "2")})
		if err != nil {
			t.Fatal(err)
		}
		parent := rs[0].ID
		h := startOps(t, dbURL, `
admin_token: "`+opsAdminToken+`"
sources:
  - name: s
    scheme: none
    targets:
      - {name: b, forward: "`+app.URL+`"}
`, nil)
		warned := warnedTargets(t, h.logs, UnworkedWarning)
		if len(warned) != 2 || warned["s/a"] == nil || warned["old"] == nil {
			t.Fatalf("warned about %v, want s/a and old: %s", warned, h.logs.String())
		}
		if w := warned["old"]; w["level"] != "WARN" || w["pending"] != 2.0 || w["processing"] != 0.0 ||
			w["end_them_with"] != "hookbox --config FILE targets retire old" || w["due_since"] == nil || w["waited"] == nil {
			t.Errorf("warning about old: %v", w)
		}
		if w := warned["s/a"]; w["pending"] != 1.0 || w["end_them_with"] != "hookbox --config FILE targets retire s/a" {
			t.Errorf("warning about s/a: %v", w)
		}

		if code := h.admin("POST", "/admin/targets/s/b/retire", opsAdminToken, nil); code != http.StatusConflict {
			t.Errorf("retire of a target this process works: %d, want 409", code)
		}
		var reply server.RetireReply
		if code := h.admin("POST", "/admin/targets/s/a/retire?dry_run=true", opsAdminToken, &reply); code != http.StatusOK ||
			reply != (server.RetireReply{Name: "s/a", RetireResult: hookbox.RetireResult{Ended: 1}, DryRun: true}) {
			t.Fatalf("dry retire of s/a: %d %+v", code, reply)
		}
		if code := h.admin("POST", "/admin/targets/s/a/retire", opsAdminToken, &reply); code != http.StatusOK ||
			reply != (server.RetireReply{Name: "s/a", RetireResult: hookbox.RetireResult{Ended: 1}}) {
			t.Fatalf("retire of s/a: %d %+v", code, reply)
		}
		if code := h.admin("POST", "/admin/targets/old/retire", opsAdminToken, &reply); code != http.StatusOK || reply.Ended != 2 {
			t.Fatalf("retire of old: %d %+v", code, reply)
		}
		// s/b's delivery is worked (done), s/a's retired (dead): the event
		// is finished.
		h.waitStatus(parent, hookbox.StatusDead)
		names, err := h.svc.Store.UnfinishedTargets(context.Background())
		if err != nil || len(names) != 0 {
			t.Errorf("unfinished after the retires: %q, %v", names, err)
		}
	})
}

// TestGoHandlerTargetIsNotUnworked: a go_handler target the config still
// has is worked by the Go program that registers its handlers, never by
// serve; it was taken for a removed one: serve told the operator to
// retire it at every start, and the admin API retired it, while `hookbox
// targets retire --config` refused. Now neither warns nor retires it.
// Nor one of books, a source with no forward, exec or targets: its events
// wait for Go handlers under its own name.
func TestGoHandlerTargetIsNotUnworked(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		d := storetest.Delivery("shop", "1")
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "ledger"}}
		if _, err := st.Ingest(context.Background(), []hookbox.Delivery{d, storetest.Delivery("books", "1")}); err != nil {
			t.Fatal(err)
		}
		h := startOps(t, dbURL, `
admin_token: "`+opsAdminToken+`"
sources:
  - name: shop
    scheme: none
    targets:
      - {name: ledger, go_handler: true}
  - name: books
    scheme: none
`, nil)
		// The warning comes before the "listening" line.
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(h.logs.String(), `"msg":"listening"`) {
			if time.Now().After(deadline) {
				t.Fatalf("no listening line:\n%s", h.logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if strings.Contains(h.logs.String(), UnworkedWarning) {
			t.Errorf("serve tells the operator to retire a queue of Go handlers of its config:\n%s", h.logs.String())
		}
		for _, name := range []string{"shop/ledger", "books"} {
			if code := h.admin("POST", "/admin/targets/"+name+"/retire", opsAdminToken, nil); code != http.StatusConflict {
				t.Errorf("admin retire of %s, worked by Go handlers = %d, want 409", name, code)
			}
			if b, err := st.TargetBacklog(context.Background(), name, time.Now()); err != nil || b.Pending != 1 {
				t.Errorf("%s's backlog after the refused retire: %+v, %v; want its 1 pending delivery", name, b, err)
			}
		}
	})
}

// warnedTargets waits until the server logged "listening" in logs (JSON
// lines), then returns the start warnings with message msg by their
// target, failing t if one target is warned twice.
func warnedTargets(t *testing.T, logs fmt.Stringer, msg string) map[string]map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"listening"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no \"listening\" within 20 s: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	warned := map[string]map[string]any{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		name, _ := rec["target"].(string)
		if warned[name] != nil {
			t.Errorf("%s warned twice", name)
		}
		warned[name] = rec
	}
	return warned
}
