package service

import (
	"context"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestUnorderedTargetWithKeyedBacklogWarned: a process whose config has
// no order_by for a target works its keyed deliveries in parallel, out of
// order; nothing said so. Serve now warns at start, once, for each target
// it works unordered that has unfinished deliveries with an order key
// (stored by a process with order_by), naming the count and the pause
// command; not for an ordered target, nor for one whose waiting
// deliveries have no key. (The targets are paused, so nothing works their
// deliveries while the test reads the log.)
func TestUnorderedTargetWithKeyedBacklogWarned(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		// Stored by a process whose config ordered s/a and s/o; s/p never.
		if _, err := st.Ingest(ctx, []hookbox.Delivery{
			storetest.Keyed("s", "a", "1", "k1"), storetest.Keyed("s", "a", "2", "k1"),
			storetest.Keyed("s", "o", "3", "k1"), storetest.Keyed("s", "p", "4", ""),
		}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"s/a", "s/o", "s/p"} {
			if err := st.PauseTarget(ctx, name, "the test reads the start log"); err != nil {
				t.Fatal(err)
			}
		}
		h := startOps(t, dbURL, `
sources:
  - name: s
    scheme: none
    targets:
      - {name: a, forward: "http://127.0.0.1:9/"}
      - {name: o, forward: "http://127.0.0.1:9/", order_by: "header:X-Key"}
      - {name: p, forward: "http://127.0.0.1:9/"}
`, nil)
		warned := warnedTargets(t, h.logs, UnorderedWarning)
		if len(warned) != 1 || warned["s/a"] == nil {
			t.Fatalf("warned about %v, want s/a alone: %s", warned, h.logs.String())
		}
		if w := warned["s/a"]; w["level"] != "WARN" || w["keyed_unfinished"] != 2.0 || w["pause_with"] != "hookbox targets pause s/a" {
			t.Errorf("warning about s/a: %v", w)
		}
	})
}
