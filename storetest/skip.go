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

// testSkipExpectsWhatWasSeen: a skip with Expect ends the delivery only
// while its attempts are the number the operator saw. One that expects
// the attempts of a death since replayed, run and died again is refused
// as Changed (with the attempts now and then, and the status), and
// nothing is written: no last error, no skip row, the key still held.
// Expecting the attempts it has, the skip applies, and again reports
// Already. (Before, Skip took no condition: the first skip ended a death
// the operator never saw.)
func testSkipExpectsWhatWasSeen(t *testing.T, s FullStore) {
	ctx := context.Background()
	ids := SeedHeldKey(t, s, "sx", "t", "K", "forward: 410 Gone", "1", "2")
	seen := status(t, s, ids[0])
	DieAgain(t, s, ids[0], "forward: 410 Gone, again")
	now := status(t, s, ids[0])
	if now.Status != hookbox.StatusDead || now.Attempts != seen.Attempts+1 {
		t.Fatalf("after a replay that died again: %+v; want dead after %d attempts", now, seen.Attempts+1)
	}

	stale := hookbox.ReplayAttempts(seen, nil)
	var ns *hookbox.NotSkippableError
	_, err := s.Skip(ctx, hookbox.SkipParams{ID: ids[0], Reason: "seen before the replay", Key: ownKey, Expect: &stale})
	if !errors.As(err, &ns) || !ns.Changed || ns.Attempts != now.Attempts || ns.Expected != stale || ns.Status != hookbox.StatusDead {
		t.Fatalf("skip expecting %d attempts of a delivery at %d: %v (%+v), want a NotSkippableError saying Changed", stale, now.Attempts, err, ns)
	}
	if e := status(t, s, ids[0]); e.LastError != now.LastError || e.OrderKey != "K" || e.Status != hookbox.StatusDead {
		t.Errorf("after the refused skip: %+v; want it as it was (%q, key K)", e, now.LastError)
	}
	as, err := s.Attempts(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Outcome == hookbox.AttemptSkip {
			t.Errorf("the refused skip wrote an attempts row: %+v", a)
		}
	}
	if held := claimByKey(t, s, hookbox.ClaimParams{Limit: 10, Sources: []string{"sx/t"}}); len(held) != 0 {
		t.Fatalf("claimed %v after the refused skip; want key K still held", held)
	}

	have := hookbox.ReplayAttempts(now, nil)
	res, err := s.Skip(ctx, hookbox.SkipParams{ID: ids[0], Reason: "seen after", Key: ownKey, Expect: &have})
	if err != nil || res.Released != "K" || res.Already {
		t.Fatalf("skip expecting the attempts it has = %+v, %v; want key K released", res, err)
	}
	if res, err := s.Skip(ctx, hookbox.SkipParams{ID: ids[0], Reason: "again", Key: ownKey, Expect: &have}); err != nil || !res.Already {
		t.Fatalf("second skip expecting the same = %+v, %v; want Already", res, err)
	}
	if got := claimByKey(t, s, hookbox.ClaimParams{Limit: 10, Sources: []string{"sx/t"}}); len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("after the skip: claimed %v, want delivery %d (K released)", got, ids[1])
	}
}

// DieAgain replays the dead delivery id, claims it (by its order key, if
// it has one) and finishes it dead again with errText, as another
// operator's replay and a worker's run would: its attempts go up by one.
func DieAgain(t testing.TB, s FullStore, id int64, errText string) {
	t.Helper()
	ctx := context.Background()
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Replay(ctx, hookbox.ReplayParams{IDs: []int64{id}}); err != nil || !slices.Equal(res.Replayed, []int64{id}) {
		t.Fatalf("replay of %d: %+v, %v", id, res, err)
	}
	got, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("again-", claimSeq.Add(1)), Limit: 1,
		Lease: time.Minute, Sources: []string{e.Source}, ByKey: e.OrderKey != ""})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim of the replayed %d: %v, %v", id, got, err)
	}
	o := outcome(got[0], hookbox.StatusDead, time.Now())
	o.Error = errText
	if errs, err := s.Finish(ctx, []hookbox.Outcome{o}); err != nil || (len(errs) > 0 && errs[0] != nil) {
		t.Fatalf("Finish: %v %v", errs, err)
	}
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
