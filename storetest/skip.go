package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testSkipReleasesKey: Skip ends one dead delivery that holds its order
// key, and the key's next delivery is claimed; the skipped one stays dead
// with the operator's reason as its last error and an attempts row, under
// a key of its own, so that a replay of it runs beside the key's others.
// Skip refuses a delivery that is not dead, a FanOut event and a missing
// id, and a second skip changes nothing.
func testSkipReleasesKey(t *testing.T, s FullStore) {
	ctx := context.Background()
	rs := ingest(t, s, Keyed("sk", "t", "1", "K"), Keyed("sk", "t", "2", "K"), Keyed("sk", "t", "3", "K"))
	byKey := func() []string {
		t.Helper()
		var ids []string
		for _, e := range claimByKey(t, s, hookbox.ClaimParams{Limit: 10, Sources: []string{"sk/t"}}) {
			ids = append(ids, e.DeliveryID)
		}
		return ids
	}
	evs, err := s.Events(ctx, hookbox.Filter{Source: "sk/t"})
	if err != nil || len(evs) != 3 {
		t.Fatalf("deliveries: %v, %v", evs, err)
	}
	slices.SortFunc(evs, func(a, b hookbox.Event) int { return int(a.ID - b.ID) })
	first, second := evs[0], evs[1]

	got := claimByKey(t, s, hookbox.ClaimParams{Limit: 10, Sources: []string{"sk/t"}})
	if len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("first claim = %v, want delivery 1 alone", got)
	}
	finish(t, s, outcome(got[0], hookbox.StatusDead, time.Now()))
	if held := byKey(); len(held) != 0 {
		t.Fatalf("claimed %v while the dead first delivery holds key K", held)
	}

	var ns *hookbox.NotSkippableError
	_, err = s.Skip(ctx, hookbox.SkipParams{ID: second.ID, Reason: "x", Key: ownKey})
	if !errors.As(err, &ns) || ns.Status != hookbox.StatusPending || ns.FanOut {
		t.Fatalf("skip of a pending delivery: %v, want a NotSkippableError saying pending", err)
	}
	_, err = s.Skip(ctx, hookbox.SkipParams{ID: rs[0].ID, Reason: "x", Key: ownKey})
	if !errors.As(err, &ns) || !ns.FanOut {
		t.Fatalf("skip of a FanOut event: %v, want a NotSkippableError saying FanOut", err)
	}
	if _, err = s.Skip(ctx, hookbox.SkipParams{ID: 1 << 40, Reason: "x", Key: ownKey}); !errors.Is(err, hookbox.ErrNotFound) {
		t.Fatalf("skip of a missing id: %v, want ErrNotFound", err)
	}

	res, err := s.Skip(ctx, hookbox.SkipParams{ID: first.ID, Reason: "the app answers 410", Via: "test", Key: ownKey})
	if err != nil || res.Released != "K" || res.Already {
		t.Fatalf("skip = %+v, %v; want key K released", res, err)
	}
	e := status(t, s, first.ID)
	if e.Status != hookbox.StatusDead || !strings.HasPrefix(e.LastError, hookbox.SkipPrefix) ||
		!strings.Contains(e.LastError, "the app answers 410") || e.OrderKey != "(own):1" || len(e.Payload) == 0 {
		t.Fatalf("after skip: %+v", e)
	}
	as, err := s.Attempts(ctx, first.ID)
	if err != nil || len(as) == 0 {
		t.Fatalf("attempts: %v, %v", as, err)
	}
	if a := as[len(as)-1]; a.Outcome != hookbox.AttemptSkip || a.Owner != "operator" || a.Attempt != 1 || a.Error != e.LastError {
		t.Fatalf("the skip's attempts row is %+v", a)
	}
	if got := byKey(); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("after the skip: claimed %v, want 2 (K released)", got)
	}
	if res, err := s.Skip(ctx, hookbox.SkipParams{ID: first.ID, Reason: "again", Key: ownKey}); err != nil || !res.Already {
		t.Fatalf("second skip = %+v, %v; want Already", res, err)
	}
	if as2, _ := s.Attempts(ctx, first.ID); len(as2) != len(as) {
		t.Fatalf("a second skip wrote to the history: %+v", as2)
	}

	// A replay of the skipped delivery runs it under its own key, while
	// delivery 2 of K still runs.
	replay(t, s, hookbox.ReplayParams{IDs: []int64{first.ID}})
	if got := byKey(); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("after a replay of the skipped delivery: claimed %v, want 1", got)
	}
}

// testSkipJudgedByItsRow: whether a dead delivery was skipped is read
// from the skip's attempts row, not from its last error, which a handler
// writes. A delivery that died of an error reading as a skip's, then one
// replayed after a skip that died again of the very text that skip wrote,
// then one replayed after a skip and ended by RetireTarget, is each
// skipped, not reported as already skipped; a second skip of each is.
func testSkipJudgedByItsRow(t *testing.T, s FullStore) {
	ctx := context.Background()
	ingest(t, s, Keyed("sj", "t", "1", "K"))
	evs, err := s.Events(ctx, hookbox.Filter{Source: "sj/t"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("deliveries: %v, %v", evs, err)
	}
	id := evs[0].ID
	dies := func(errText string) {
		t.Helper()
		got := claim(t, s, time.Now(), 1, "sj/t")
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim = %v, want delivery %d", got, id)
		}
		o := outcome(got[0], hookbox.StatusDead, time.Now())
		o.Error = errText
		finish(t, s, o)
	}
	skips := func(what string) {
		t.Helper()
		res, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: what, Key: ownKey})
		if err != nil || res.Already {
			t.Fatalf("skip after %s = %+v, %v; want it skipped", what, res, err)
		}
		if res, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: what, Key: ownKey}); err != nil || !res.Already {
			t.Fatalf("second skip after %s = %+v, %v; want Already", what, res, err)
		}
	}

	dies(hookbox.SkipPrefix + ": x")
	skips("a handler's error like a skip's")
	skipText := status(t, s, id).LastError

	replay(t, s, hookbox.ReplayParams{IDs: []int64{id}})
	dies(skipText)
	skips("a handler's error copying the skip's")

	replay(t, s, hookbox.ReplayParams{IDs: []int64{id}})
	if res, err := s.RetireTarget(ctx, hookbox.RetireParams{Name: "sj/t", Reason: hookbox.RetireReason("sj/t")}); err != nil || res.Ended != 1 {
		t.Fatalf("retire = %+v, %v; want the replayed delivery ended", res, err)
	}
	skips("a retire")
}

// ownKey is the test's stand-in for routing.NoValueKey.
func ownKey(deliveryID string) string { return "(own):" + deliveryID }

// SeedHeldKey ingests one delivery per id of source to target under
// order key key, and makes the first dead (a claim by key, then a dead
// finish with errText): under on_dead: hold it holds the key, and the
// others wait, pending, behind it. It returns the deliveries' ids in
// order.
func SeedHeldKey(t testing.TB, s QueueStore, source, target, key, errText string, ids ...string) []int64 {
	t.Helper()
	ctx := context.Background()
	var ds []hookbox.Delivery
	for _, id := range ids {
		ds = append(ds, Keyed(source, target, id, key))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	q := hookbox.QueueName(source, target)
	evs, err := s.Events(ctx, hookbox.Filter{Source: q, Limit: len(ids) + 1000})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]int64{}
	for _, e := range evs {
		byID[e.DeliveryID] = e.ID
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	got, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("held-", claimSeq.Add(1)), Limit: 1,
		Lease: time.Minute, Sources: []string{q}, ByKey: true})
	if err != nil || len(got) != 1 || got[0].ID != out[0] {
		t.Fatalf("claim of the first delivery of key %q: %v, %v", key, got, err)
	}
	o := outcome(got[0], hookbox.StatusDead, time.Now())
	o.Error = errText
	if _, err := s.Finish(ctx, []hookbox.Outcome{o}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return out
}

// testKeyHead: KeyHead names the first delivery that holds a key, dead or
// not, and ErrNotFound for a key nothing holds. (events show read every
// older row to find a dead delivery of the key, and named the wrong one
// past 10,000 of them.)
func testKeyHead(t *testing.T, s FullStore) {
	ctx := context.Background()
	ids := SeedHeldKey(t, s, "kh", "app", "cust-1", "forward: 410 Gone", "a1", "a2", "a3")
	id, status, err := s.KeyHead(ctx, "kh/app", "cust-1")
	if err != nil || id != ids[0] || status != hookbox.StatusDead {
		t.Fatalf("KeyHead(kh/app, cust-1) = %d, %s, %v; want %d, dead", id, status, err, ids[0])
	}
	if _, _, err := s.KeyHead(ctx, "kh/app", "cust-2"); !errors.Is(err, hookbox.ErrNotFound) {
		t.Errorf("KeyHead of a key nothing holds: %v, want ErrNotFound", err)
	}
	if _, err := s.Skip(ctx, hookbox.SkipParams{ID: ids[0], Key: func(d string) string { return "(none):" + d }}); err != nil {
		t.Fatal(err)
	}
	if id, status, err := s.KeyHead(ctx, "kh/app", "cust-1"); err != nil || id != ids[1] || status != hookbox.StatusPending {
		t.Errorf("KeyHead after the head was skipped = %d, %s, %v; want %d, pending", id, status, err, ids[1])
	}
}
