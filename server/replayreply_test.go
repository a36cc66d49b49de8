package server_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestAdminReplayReplyKeys: the admin API's replay replies, which share
// hookbox.ReplayResult with replay --json, left "skipped" out when it
// was empty (always, for them); it is always there, with
// "skipped_reasons", so a script reads one shape from both.
func TestAdminReplayReplyKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		dead := seed(t, h.st, "polar", "order.paid", hookbox.StatusDead, time.Now(), "x1")
		for _, path := range []string{
			"/admin/replay?source=nosuch&dry_run=true",
			"/admin/replay?source=polar&dry_run=true",
			fmt.Sprintf("/admin/events/%d/replay", dead[0]),
		} {
			code, body := h.call("POST", path)
			var m map[string]json.RawMessage
			if code != 200 || json.Unmarshal(body, &m) != nil {
				t.Fatalf("POST %s: %d %s", path, code, body)
			}
			if string(m["skipped"]) != "[]" || string(m["skipped_reasons"]) != "{}" || m["replayed"] == nil || m["dry_run"] == nil {
				t.Errorf("POST %s: %s; want replayed, skipped: [], skipped_reasons: {} and dry_run", path, body)
			}
		}
	})
}
