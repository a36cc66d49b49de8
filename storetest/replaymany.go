package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookbox/hookbox"
)

// testReplayManyNamed: a replay of many events named by id (hookbox replay
// ID…, or a library caller) replays them all, on every store, as a
// replay by filter of the same events does: 17,000 ids.
func testReplayManyNamed(t *testing.T, s FullStore) {
	const n = 17000
	var ids []int64
	for start := 0; start < n; start += 1000 {
		ds := make([]hookbox.Delivery, 1000)
		for i := range ds {
			ds[i] = Delivery("many", fmt.Sprint("m", start+i))
		}
		for _, r := range ingest(t, s, ds...) {
			ids = append(ids, r.ID)
		}
	}
	for _, dry := range []bool{true, false} {
		res, err := s.Replay(context.Background(), hookbox.ReplayParams{IDs: ids, DryRun: dry, Rate: hookbox.ReplayAtOnce})
		if err != nil {
			t.Fatalf("Replay of %d named pending events (dry run %v): %v", n, dry, err)
		}
		if len(res.Replayed) != n || len(res.Skipped) != 0 {
			t.Fatalf("Replay (dry run %v) replayed %d, skipped %d; want %d, 0", dry, len(res.Replayed), len(res.Skipped), n)
		}
	}
}
