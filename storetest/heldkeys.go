package storetest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testHeldKeys: HeldKeys counts, per queue name asked for, the order keys
// whose first delivery is dead with a delivery waiting behind it, once
// however many of the key's deliveries are dead; not a key whose dead
// delivery was skipped or replayed, nor one of pending deliveries only,
// nor a dead delivery nothing waits behind or that waits behind a pending
// one, nor an unordered queue's dead delivery; and a name with none reads
// 0.
func testHeldKeys(t *testing.T, s FullStore) {
	ctx := context.Background()
	// Each seed claims the first delivery of the next key that is free:
	// the keys seeded before are held by then.
	SeedHeldKey(t, s, "hk", "app", "a", "died", "a1", "a2", "a3")
	SeedHeldKey(t, s, "hk", "app", "b", "died", "b1", "b2")
	skipped := SeedHeldKey(t, s, "hk", "app", "c", "died", "c1", "c2")
	replayed := SeedHeldKey(t, s, "hk", "app", "d", "died", "d1", "d2")
	SeedHeldKey(t, s, "hk", "app", "f", "died", "f1") // nothing waits behind it
	ingest(t, s, Keyed("hk", "app", "e1", "e"), Keyed("hk", "app", "e2", "e"))
	SeedHeldKey(t, s, "hk2", "app", "a", "died", "x1", "x2")
	// An unordered queue: a dead delivery and one pending after it.
	ingest(t, s, Keyed("hu", "app", "u1", ""))
	got, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("hu-", claimSeq.Add(1)), Limit: 1,
		Lease: time.Minute, Sources: []string{"hu/app"}})
	if err != nil || len(got) != 1 || got[0].OrderKey != "" {
		t.Fatalf("claim of the unordered delivery: %v, %v", got, err)
	}
	finish(t, s, outcome(got[0], hookbox.StatusDead, time.Now()))
	ingest(t, s, Keyed("hu", "app", "u2", ""))

	// Two dead deliveries of one key, died under claims that pass dead
	// ones (on_dead: skip, since changed to hold): the key counts once.
	ingest(t, s, Keyed("hk3", "app", "g1", "g"), Keyed("hk3", "app", "g2", "g"), Keyed("hk3", "app", "g3", "g"))
	var twice []int64
	for range 2 {
		got := claimByKey(t, s, hookbox.ClaimParams{Limit: 1, Sources: []string{"hk3/app"}, SkipDead: true})
		if len(got) != 1 {
			t.Fatalf("claim passing dead deliveries: %v", got)
		}
		finish(t, s, outcome(got[0], hookbox.StatusDead, time.Now()))
		twice = append(twice, got[0].ID)
	}

	names := []string{"hk/app", "hk2/app", "hk3/app", "hu/app", "none/app"}
	check := func(when string, want map[string]int) {
		t.Helper()
		got, err := s.HeldKeys(ctx, names)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("HeldKeys %s = %v, %v; want %v", when, got, err, want)
		}
	}
	check("after seeding", map[string]int{"hk/app": 4, "hk2/app": 1, "hk3/app": 1, "hu/app": 0, "none/app": 0})

	if _, err := s.Skip(ctx, hookbox.SkipParams{ID: skipped[0], Reason: "gone", Key: ownKey}); err != nil {
		t.Fatal(err)
	}
	replay(t, s, hookbox.ReplayParams{IDs: []int64{replayed[0]}})
	// g1 pending again heads its key: the dead g2 behind it holds nothing.
	replay(t, s, hookbox.ReplayParams{IDs: []int64{twice[0]}})
	check("after a skip and replays", map[string]int{"hk/app": 2, "hk2/app": 1, "hk3/app": 0, "hu/app": 0, "none/app": 0})

	if got, err := s.HeldKeys(ctx, []string{"hk2/app"}); err != nil || !maps.Equal(got, map[string]int{"hk2/app": 1}) {
		t.Fatalf("HeldKeys of one name = %v, %v", got, err)
	}
	if got, err := s.HeldKeys(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("HeldKeys of no name = %v, %v; want an empty map", got, err)
	}
}
