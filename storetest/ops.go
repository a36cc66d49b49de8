package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
)

// FullStore is everything a hookbox store is.
type FullStore interface {
	hookbox.Store
	hookbox.Queue
	hookbox.Ops
}

// RunOps runs the operator half of the suite: replay, purge, payload
// retention, statistics and retiring a target.
func RunOps(t *testing.T, open func(t *testing.T) FullStore) {
	tests := map[string]func(*testing.T, FullStore){
		"ReplayDeadEndsPending":           testReplayDead,
		"ReplayDoneNeedsFlag":             testReplayDoneNeedsFlag,
		"ReplayNeverTouchesInFlight":      testReplayInFlight,
		"ReplayByFilterAndDryRun":         testReplayFilter,
		"ReplayManyByFilter":              testReplayMany,
		"ReplayManyNamed":                 testReplayManyNamed,
		"ReplayStoppedPartWay":            testReplayStoppedPartWay,
		"ReplayLetsLiveThrough":           testReplayLetsLiveThrough,
		"ReplayPacesDueTimes":             testReplayPacesDueTimes,
		"ReplaySmallIsImmediate":          testReplaySmallIsImmediate,
		"ReplayPaceKeepsKeyOrder":         testReplayPaceKeepsKeyOrder,
		"ReplayResumedKeepsPace":          testReplayResumedKeepsPace,
		"ReplayRefusesClearedPayload":     testReplayRefusesClearedPayload,
		"FirstAttemptDoneHasNoRow":        testFirstAttemptDone,
		"EmptyPayloadIsNotCleared":        testEmptyPayloadIsNotCleared,
		"PurgeOnlyOldFinished":            testPurgeOnlyOldFinished,
		"PurgeDryRunChangesNothing":       testPurgeDryRun,
		"PurgeStoppedPartWay":             testPurgeStoppedPartWay,
		"PurgeNeverHandsOutIDsAgain":      testPurgeNeverHandsOutIDsAgain,
		"RetentionRefusesFutureCutoff":    testRetentionRefusesFutureCutoff,
		"ClearPayloadsKeepsTheRecord":     testClearPayloads,
		"ClearPayloadsManyInSlices":       testClearPayloadsMany,
		"ClearPayloadsDropsSenderData":    testClearPayloadsDropsSenderData,
		"ClearWaitsForLateDeliveries":     testClearWaitsForLateDeliveries,
		"StatsCountByStatus":              testStats,
		"ProgressAfterEachBatch":          testProgress,
		"RetireTargetEndsUnworked":        testRetireTarget,
		"RetireManyInSlices":              testRetireManyInSlices,
		"RetireKeepsUnknownAttempt":       testRetireKeepsUnknownAttempt,
		"DiedAttemptIsNotDone":            testDiedAttemptIsNotDone,
		"RaiseIDFloor":                    testRaiseIDFloor,
		"ReplayFanOutReportsEachDelivery": testReplayFanOutReportsEachDelivery,
		"ReplayExpectsWhatWasSeen":        testReplayExpectsWhatWasSeen,
		"SkipReleasesKey":                 testSkipReleasesKey,
		"SkipExpectsWhatWasSeen":          testSkipExpectsWhatWasSeen,
		"SkipJudgedByItsRow":              testSkipJudgedByItsRow,
		"KeyHead":                         testKeyHead,
		"HeldKeys":                        testHeldKeys,
	}
	maps.Copy(tests, parityTests)
	maps.Copy(tests, pagingTests)
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

// finishAs ingests one event per id of source and leaves it in status st,
// finished at `finished`.
func finishAs(t *testing.T, s FullStore, source string, st hookbox.Status, finished time.Time, ids ...string) []int64 {
	t.Helper()
	var ds []hookbox.Delivery
	for _, id := range ids {
		ds = append(ds, Delivery(source, id))
	}
	return Seed(t, s, st, finished, "failed for the test", ds...)
}

func replay(t *testing.T, s FullStore, p hookbox.ReplayParams) hookbox.ReplayResult {
	t.Helper()
	res, err := s.Replay(context.Background(), p)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return res
}

// testFirstAttemptDone: a first attempt that succeeds gets no attempts row
// (hookbox.AttemptStored) and is still listed, finished when its event
// was (its updated_at: the worker's finish time, on the store's clock,
// which for PostgreSQL is the server's, so within a round trip of the
// worker's); a replay writes it down before rewriting the event, so the
// history reads the same after it; later attempts have rows.
func testFirstAttemptDone(t *testing.T, s FullStore) {
	ingest(t, s, Delivery("fd", "1"))
	worker := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ev := claim(t, s, time.Now(), 1, "fd")[0]
	finish(t, s, outcome(ev, hookbox.StatusDone, worker))
	first := status(t, s, ev.ID).UpdatedAt
	if d := first.Sub(worker); d < -10*time.Second || d > 10*time.Second {
		t.Fatalf("the event finished at %v has updated_at %v", worker, first)
	}
	check := func(when string, want []hookbox.Attempt) {
		t.Helper()
		as, err := s.Attempts(context.Background(), ev.ID)
		if err != nil || len(as) != len(want) {
			t.Fatalf("%s: attempts %+v, %v; want %d", when, as, err, len(want))
		}
		for i, w := range want {
			a := as[i]
			if a.Attempt != w.Attempt || a.Owner != w.Owner || a.Outcome != w.Outcome ||
				(!w.FinishedAt.IsZero() && !a.FinishedAt.Equal(w.FinishedAt)) {
				t.Errorf("%s: attempt %d is %+v, want %+v", when, i, a, w)
			}
		}
	}
	want := []hookbox.Attempt{{Attempt: 1, Outcome: hookbox.AttemptDone, StartedAt: first, FinishedAt: first}}
	check("after the first attempt", want)
	replay(t, s, hookbox.ReplayParams{IDs: []int64{ev.ID}, IncludeDone: true})
	want = append(want, hookbox.Attempt{Attempt: 1, Owner: "operator", Outcome: hookbox.AttemptReplay})
	check("after a replay", want)
	ev = claim(t, s, time.Now(), 1, "fd")[0]
	second := time.Now().Truncate(time.Millisecond)
	finish(t, s, outcome(ev, hookbox.StatusDone, second))
	want = append(want, hookbox.Attempt{Attempt: 2, Owner: ev.LeaseOwner, Outcome: hookbox.AttemptDone, FinishedAt: second})
	check("after the second attempt", want)
}

func testReplayDead(t *testing.T, s FullStore) {
	ids := finishAs(t, s, "rd", hookbox.StatusDead, time.Now(), "1")
	res := replay(t, s, hookbox.ReplayParams{IDs: ids})
	if len(res.Replayed) != 1 || res.Replayed[0] != ids[0] || len(res.Skipped) != 0 {
		t.Fatalf("replay = %+v", res)
	}
	e := status(t, s, ids[0])
	// Attempt numbers go on after a replay; the retry budget counts from
	// AttemptBase.
	if e.Status != hookbox.StatusPending || e.Attempts != 1 || e.AttemptBase != 1 || e.LeaseOwner != "" || len(e.Payload) == 0 {
		t.Fatalf("after replay: %+v", e)
	}
	evs := claim(t, s, time.Now(), 1, "rd")
	if len(evs) != 1 || evs[0].ID != ids[0] || evs[0].Attempts != 2 || evs[0].AttemptBase != 1 {
		t.Fatalf("replayed event not claimable as attempt 2 with base 1: %+v", evs)
	}
	as, err := s.Attempts(context.Background(), ids[0])
	if err != nil || len(as) == 0 || as[len(as)-1].Outcome != hookbox.AttemptReplay || as[len(as)-1].Attempt != 1 {
		t.Fatalf("the replay is not marked in the history: %+v, %v", as, err)
	}
	finish(t, s, outcome(evs[0], hookbox.StatusDone, time.Now()))
	if e := status(t, s, ids[0]); e.Status != hookbox.StatusDone {
		t.Fatalf("replayed event ended %s", e.Status)
	}
}

func testReplayDoneNeedsFlag(t *testing.T, s FullStore) {
	ids := finishAs(t, s, "rdone", hookbox.StatusDone, time.Now(), "1")
	res := replay(t, s, hookbox.ReplayParams{IDs: ids})
	if len(res.Replayed) != 0 || len(res.Skipped) != 1 {
		t.Fatalf("done replayed without the flag: %+v", res)
	}
	if e := status(t, s, ids[0]); e.Status != hookbox.StatusDone {
		t.Fatalf("status %s", e.Status)
	}
	res = replay(t, s, hookbox.ReplayParams{IDs: ids, IncludeDone: true})
	if len(res.Replayed) != 1 {
		t.Fatalf("done not replayed with the flag: %+v", res)
	}
	if e := status(t, s, ids[0]); e.Status != hookbox.StatusPending {
		t.Fatalf("status %s", e.Status)
	}
}

func testReplayInFlight(t *testing.T, s FullStore) {
	ids := finishAs(t, s, "rif", hookbox.StatusProcessing, time.Now(), "1")
	res := replay(t, s, hookbox.ReplayParams{IDs: append(ids, 987654), IncludeDone: true})
	if len(res.Replayed) != 0 || len(res.Skipped) != 2 {
		t.Fatalf("replay of in-flight and missing events = %+v", res)
	}
	if e := status(t, s, ids[0]); e.Status != hookbox.StatusProcessing || e.LeaseOwner == "" {
		t.Fatalf("in-flight event changed: %+v", e)
	}
}

func testReplayFilter(t *testing.T, s FullStore) {
	dead := finishAs(t, s, "rf", hookbox.StatusDead, time.Now(), "1", "2")
	finishAs(t, s, "rf", hookbox.StatusDone, time.Now(), "3")
	other := finishAs(t, s, "rf-other", hookbox.StatusDead, time.Now(), "1")
	f := hookbox.Filter{Source: "rf", Status: hookbox.StatusDead}
	dry := replay(t, s, hookbox.ReplayParams{Filter: f, DryRun: true})
	if len(dry.Replayed) != 2 {
		t.Fatalf("dry run would replay %v, want the 2 dead of rf", dry.Replayed)
	}
	for _, id := range dead {
		if e := status(t, s, id); e.Status != hookbox.StatusDead {
			t.Fatalf("dry run changed event %d to %s", id, e.Status)
		}
	}
	res := replay(t, s, hookbox.ReplayParams{Filter: f})
	if len(res.Replayed) != 2 || res.Replayed[0] != dead[0] || res.Replayed[1] != dead[1] {
		t.Fatalf("replay = %v, want %v", res.Replayed, dead)
	}
	if e := status(t, s, other[0]); e.Status != hookbox.StatusDead {
		t.Fatalf("another source's dead event was replayed")
	}
}

func testPurgeOnlyOldFinished(t *testing.T, s FullStore) {
	old := time.Now().Add(-48 * time.Hour)
	oldDone := finishAs(t, s, "p", hookbox.StatusDone, old, "d1", "d2", "d3", "d4", "d5")
	oldDead := finishAs(t, s, "p", hookbox.StatusDead, old, "x1")
	newDone := finishAs(t, s, "p", hookbox.StatusDone, time.Now(), "d6")
	pending := finishAs(t, s, "p", hookbox.StatusPending, old, "p1")
	processing := finishAs(t, s, "p2", hookbox.StatusProcessing, old, "p2")
	cutoff := time.Now().Add(-24 * time.Hour)
	if as, err := s.Attempts(context.Background(), oldDone[0]); err != nil || len(as) == 0 {
		t.Fatalf("attempts of a done event before the purge: %v, %v; want some", as, err)
	}
	res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: cutoff, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 5 || res.Dead != 0 {
		t.Fatalf("purge = %+v, want 5 done", res)
	}
	for _, id := range oldDone {
		if _, err := s.Event(context.Background(), id); err == nil {
			t.Errorf("old done event %d survived", id)
		}
		if as, err := s.Attempts(context.Background(), id); err != nil || len(as) != 0 {
			t.Errorf("attempts of purged event %d: %v, %v; want none", id, as, err)
		}
	}
	for _, id := range append(append(append(oldDead, newDone...), pending...), processing...) {
		if _, err := s.Event(context.Background(), id); err != nil {
			t.Errorf("event %d was purged: %v", id, err)
		}
	}
	res, err = s.Purge(context.Background(), hookbox.PurgeParams{Before: cutoff, IncludeDead: true})
	if err != nil || res.Dead != 1 || res.Done != 0 {
		t.Fatalf("purge with dead = %+v, %v", res, err)
	}
	// A redelivery of a purged id is a new event again.
	if rs := ingest(t, s, Delivery("p", "d1")); rs[0].Duplicate {
		t.Errorf("a purged id is still remembered")
	}
}

// testPurgeStoppedPartWay: a purge whose context is cancelled once its
// first batch has committed (Progress is called after each commit)
// returns the error with the count of what the committed batch deleted,
// exactly the events now gone, more than none and fewer than all. The
// same purge run again deletes the rest (the newest event aside, which a
// store may keep).
func testPurgeStoppedPartWay(t *testing.T, s FullStore) {
	old := time.Now().Add(-48 * time.Hour)
	finishAs(t, s, "pstop", hookbox.StatusDone, old, "1", "2", "3", "4", "5", "6", "7")
	finishAs(t, s, "pstop", hookbox.StatusDone, time.Now(), "new") // the newest event, which SQLite keeps
	all := count(t, s, hookbox.Filter{Source: "pstop"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cutoff := time.Now().Add(-24 * time.Hour)
	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: cutoff, BatchSize: 2,
		Progress: func(r hookbox.PurgeResult) {
			if r.Total() > 0 {
				cancel()
			}
		}})
	if err == nil {
		t.Fatalf("a purge cancelled after its first batch returned no error (deleted %+v)", res)
	}
	gone := all - count(t, s, hookbox.Filter{Source: "pstop"})
	if res.Total() != gone || gone == 0 || gone >= 7 || res.Done != res.Total() {
		t.Fatalf("the stopped purge says %+v deleted; %d of 7 old events are gone; want the count of those gone, after its first batch", res, gone)
	}
	rest, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: cutoff, BatchSize: 2})
	if err != nil || rest.Done != 7-gone {
		t.Fatalf("running it again = %+v, %v; want the %d old events left", rest, err, 7-gone)
	}
}

func testPurgeDryRun(t *testing.T, s FullStore) {
	old := time.Now().Add(-48 * time.Hour)
	ids := finishAs(t, s, "pd", hookbox.StatusDone, old, "1", "2")
	finishAs(t, s, "pd", hookbox.StatusDead, old, "3")
	ingestNewer(t, s)
	res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now(), IncludeDead: true, DryRun: true})
	if err != nil || res.Done != 2 || res.Dead != 1 {
		t.Fatalf("dry purge = %+v, %v", res, err)
	}
	for _, id := range ids {
		if _, err := s.Event(context.Background(), id); err != nil {
			t.Fatalf("dry run deleted event %d", id)
		}
	}
}

// testPurgeNeverHandsOutIDsAgain: an event id names one event for good
// (Hookbox-Event-Id, HOOKBOX_EVENT_ID, log lines, tail's cursor, replay
// ID), so once a purge deleted every event, the newest and a fan-out
// event's deliveries included, the next event still gets an id larger
// than every id handed out before. SQLite gave the purged ids out again.
func testPurgeNeverHandsOutIDsAgain(t *testing.T, s FullStore) {
	ctx := context.Background()
	handedOut := finishAs(t, s, "ids", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "1", "2", "3")
	// A fan-out event last: its deliveries hold the largest ids.
	fo := ingest(t, s, fanOut("ids-fo", "4", "a", "b"))
	now := time.Now()
	for _, target := range []string{"ids-fo/a", "ids-fo/b"} {
		ds := claim(t, s, now, 10, target)
		if len(ds) != 1 {
			t.Fatalf("claimed %d deliveries of %s, want 1", len(ds), target)
		}
		finish(t, s, outcome(ds[0], hookbox.StatusDone, now))
		handedOut = append(handedOut, ds[0].ID)
	}
	handedOut = append(handedOut, fo[0].ID)
	time.Sleep(2 * time.Millisecond) // a cut-off strictly after the last finish
	if _, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now(), IncludeDead: true}); err != nil {
		t.Fatal(err)
	}
	ids := func() []int64 {
		t.Helper()
		evs, err := s.Events(ctx, hookbox.Filter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, ev := range evs {
			ids = append(ids, ev.ID)
		}
		return ids
	}
	kept := ids() // a store may keep the newest
	ingest(t, s, Delivery("ids", "5"), fanOut("ids-fo", "6", "a"))
	var fresh []int64
	for _, id := range ids() {
		if !slices.Contains(kept, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) != 3 {
		t.Fatalf("new rows %v after the purge, want 3: two events and a delivery", fresh)
	}
	if slices.Min(fresh) <= slices.Max(handedOut) {
		t.Errorf("after a purge, new rows got ids %v, not all above %v, the ids handed out before", fresh, handedOut)
	}
}

// testRetentionRefusesFutureCutoff: a cut-off later than now (what a day
// count that overflowed time.Duration produces) is an error, and neither
// Purge nor ClearPayloads deletes anything with it.
func testRetentionRefusesFutureCutoff(t *testing.T, s FullStore) {
	done := finishAs(t, s, "fut", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "1")
	future := time.Now().Add(8295 * 24 * time.Hour) // 200,000 days wrapped around
	for _, dry := range []bool{true, false} {
		if res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: future, DryRun: dry}); err == nil {
			t.Errorf("Purge with a future cut-off (dry %v) = %+v, want an error", dry, res)
		}
	}
	if n, err := s.ClearPayloads(context.Background(), future); err == nil {
		t.Errorf("ClearPayloads with a future cut-off = %d, want an error", n)
	}
	e := status(t, s, done[0])
	if e.Status != hookbox.StatusDone || len(e.Payload) == 0 {
		t.Fatalf("event after refused retention: %+v", e)
	}
}

func testClearPayloads(t *testing.T, s FullStore) {
	old := time.Now().Add(-48 * time.Hour)
	done := finishAs(t, s, "cp", hookbox.StatusDone, old, "1")
	dead := finishAs(t, s, "cp", hookbox.StatusDead, old, "2")
	pending := finishAs(t, s, "cp", hookbox.StatusPending, old, "3")
	n, err := s.ClearPayloads(context.Background(), time.Now().Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("ClearPayloads = %d, %v; want 1", n, err)
	}
	e := status(t, s, done[0])
	if len(e.Payload) != 0 || e.Status != hookbox.StatusDone || e.DeliveryID != "1" {
		t.Fatalf("cleared event = %+v", e)
	}
	for _, id := range []int64{dead[0], pending[0]} {
		if e := status(t, s, id); len(e.Payload) == 0 {
			t.Errorf("payload of %s event %d was cleared", e.Status, id)
		}
	}
	if rs := ingest(t, s, Delivery("cp", "1")); !rs[0].Duplicate {
		t.Errorf("clearing the payload forgot the id")
	}
}

// testClearPayloadsMany: more done events than one slice clears, all
// finished at the same instant (so the cursor must break ties by id), are
// all cleared in one run, and a second run finds nothing left.
func testClearPayloadsMany(t *testing.T, s FullStore) {
	ids := make([]string, 2345)
	for i := range ids {
		ids[i] = fmt.Sprint("c", i)
	}
	finishAs(t, s, "cpm", hookbox.StatusDone, time.Now().Add(-48*time.Hour), ids...)
	n, err := s.ClearPayloads(context.Background(), time.Now().Add(-time.Hour))
	if err != nil || n != len(ids) {
		t.Fatalf("ClearPayloads = %d, %v; want %d", n, err, len(ids))
	}
	if n, err := s.ClearPayloads(context.Background(), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("second ClearPayloads = %d, %v; want 0", n, err)
	}
}

// testClearPayloadsDropsSenderData: payload retention drops, with a done
// row's payload, what came with it or from it: its headers (a shop's
// domain, a user id in a custom header, the client's address), its order
// key (a JSON field of the payload), its last error and the error texts of
// its attempts (a target's reply or a command's output can echo the
// payload). The dedupe memory stays: id, delivery id, event type, status,
// the attempts' numbers and outcomes. A dead delivery keeps all of it (it
// can be replayed), and so does a pending one, whose key still orders it;
// the dead one still holds the key. A second run finds nothing left.
func testClearPayloadsDropsSenderData(t *testing.T, s FullStore) {
	ctx := context.Background()
	const private = "shop-7f3a.example"
	old := time.Now().Add(-48 * time.Hour)
	key := "customer:" + private
	keyed := func(id string) hookbox.Delivery {
		d := Keyed("sd", "app", id, key)
		d.Header.Set("X-Shop-Domain", private)
		return d
	}
	events := ingest(t, s, keyed("1"), keyed("2"), keyed("3"))
	echo := "the app answered 422: {\"shop\":\"" + private + "\"}"
	take := func(want string) hookbox.Event {
		t.Helper()
		got := claimByKey(t, s, hookbox.ClaimParams{Limit: 1, Sources: []string{"sd/app"}})
		if len(got) != 1 || got[0].DeliveryID != want {
			t.Fatalf("claim by key = %+v; want delivery %s", got, want)
		}
		return got[0]
	}
	end := func(e hookbox.Event, st hookbox.Status, errText string) {
		t.Helper()
		o := outcome(e, st, old)
		o.Error = errText
		if errs := finish(t, s, o); errs[0] != nil {
			t.Fatalf("finish %d as %s: %v", e.ID, st, errs[0])
		}
	}
	first := take("1")
	end(first, hookbox.StatusPending, echo) // retried, then done
	end(take("1"), hookbox.StatusDone, "")
	dead := take("2")
	end(dead, hookbox.StatusDead, echo)
	plain := Delivery("sd", "plain")
	plain.Header.Set("X-Shop-Domain", private)
	plainID := Seed(t, s, hookbox.StatusDone, old, echo, plain)[0]
	waiting := deliveryOf(t, s, events[2].ID)
	time.Sleep(2 * time.Millisecond) // a cut-off strictly after the FanOut events were stored

	n, err := s.ClearPayloads(ctx, time.Now())
	// The done delivery, its event, the event of the dead delivery (which
	// keeps its own copy) and the plain event.
	if err != nil || n != 4 {
		t.Fatalf("ClearPayloads = %d, %v; want 4", n, err)
	}
	for _, id := range []int64{first.ID, events[0].ID, plainID} {
		e := status(t, s, id)
		if !e.PayloadCleared || len(e.Header) != 0 || e.OrderKey != "" || e.LastError != "" {
			t.Errorf("row %d after clearing: payload cleared %v, headers %v, order key %q, last error %q; want all gone",
				id, e.PayloadCleared, e.Header, e.OrderKey, e.LastError)
		}
		if e.Status != hookbox.StatusDone || e.DeliveryID == "" || e.EventType != "test.event" {
			t.Errorf("row %d lost its record: %+v", id, e)
		}
		as, err := s.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Error != "" {
				t.Errorf("row %d: attempt %d (%s) kept its error %q", id, a.Attempt, a.Outcome, a.Error)
			}
		}
		if id == first.ID && (len(as) != 2 || as[0].Outcome != hookbox.AttemptRetry || as[1].Outcome != hookbox.AttemptDone) {
			t.Errorf("history of the cleared delivery = %+v; want its retry and its success", as)
		}
	}
	for _, id := range []int64{dead.ID, waiting} {
		e := status(t, s, id)
		if e.PayloadCleared || e.Header.Get("X-Shop-Domain") != private || e.OrderKey != key {
			t.Errorf("%s delivery %d lost data: %+v", e.Status, id, e)
		}
	}
	if e := status(t, s, dead.ID); e.LastError != echo {
		t.Errorf("dead delivery's last error = %q, want %q", e.LastError, echo)
	}
	if as, err := s.Attempts(ctx, dead.ID); err != nil || len(as) != 1 || as[0].Error != echo {
		t.Errorf("dead delivery's attempts = %+v, %v; want its error kept", as, err)
	}
	if held, err := s.HeldKeys(ctx, []string{"sd/app"}); err != nil || held["sd/app"] != 1 {
		t.Errorf("HeldKeys after clearing = %v, %v; want the dead delivery still holding its key", held, err)
	}
	if got := claimByKey(t, s, hookbox.ClaimParams{Limit: 1, Sources: []string{"sd/app"}}); len(got) != 0 {
		t.Errorf("claimed %+v behind a dead delivery of its key", got)
	}
	if rs := ingest(t, s, keyed("1"), plain); !rs[0].Duplicate || !rs[1].Duplicate {
		t.Errorf("clearing forgot ids: %+v", rs)
	}
	if n, err := s.ClearPayloads(ctx, time.Now()); err != nil || n != 0 {
		t.Errorf("second ClearPayloads = %d, %v; want 0", n, err)
	}
}

// deliveryOf returns the id of the one delivery of the FanOut event id.
func deliveryOf(t *testing.T, s FullStore, id int64) int64 {
	t.Helper()
	ds, err := s.Events(context.Background(), hookbox.Filter{Parent: id})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries of %d = %+v, %v; want one", id, ds, err)
	}
	return ds[0].ID
}

func testStats(t *testing.T, s FullStore) {
	finishAs(t, s, "st", hookbox.StatusDone, time.Now(), "1", "2")
	finishAs(t, s, "st", hookbox.StatusDead, time.Now(), "3")
	finishAs(t, s, "st", hookbox.StatusPending, time.Now(), "4")
	st, err := s.Stats(context.Background(), time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[hookbox.StatusDone] != 2 || st.ByStatus[hookbox.StatusDead] != 1 || st.ByStatus[hookbox.StatusPending] != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if st.OldestDue.IsZero() || time.Since(st.OldestDue) > time.Minute {
		t.Fatalf("oldest due = %v", st.OldestDue)
	}
}

// Seed ingests ds (all of one source, which must have no other unfinished
// events) and leaves them in status st: pending as ingested, processing
// under a live lease, or finished at `at` with errText as the attempt's
// error. It returns the event ids in the order of ds. Tests outside this
// package use it to set up listings, replays and purges.
func Seed(t testing.TB, s QueueStore, st hookbox.Status, at time.Time, errText string, ds ...hookbox.Delivery) []int64 {
	t.Helper()
	ctx := context.Background()
	rs, err := s.Ingest(ctx, ds)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	if st == hookbox.StatusPending || len(ds) == 0 {
		return ids
	}
	seedFinish(t, s, st, at, errText, ds[0].Source, len(ds))
	return ids
}

// SeedSends records a send of kind for each key, in one transaction
// (effect.RecordSend, as a program's handler does), and takes them to
// status st as Seed does, returning their event ids. st must not be
// pending: the ids are read by claiming the sends.
func SeedSends(t testing.TB, s interface {
	QueueStore
	hookbox.Transactor
}, st hookbox.Status, at time.Time, errText, kind string, keys ...string) []int64 {
	t.Helper()
	if st == hookbox.StatusPending {
		t.Fatal("SeedSends: a pending send's id is not read")
	}
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		for _, k := range keys {
			if recorded, err := effect.RecordSend(ctx, tx, kind, k, []byte(`{}`)); err != nil || !recorded {
				return fmt.Errorf("record send %s/%s: %v, %v", kind, k, recorded, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs := seedFinish(t, s, st, at, errText, effect.SendSource(kind), len(keys))
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	return ids
}

// seedFinish claims the n due events of source and takes them to status
// st (processing, done or dead), as Seed says, and returns them as
// claimed.
func seedFinish(t testing.TB, s QueueStore, st hookbox.Status, at time.Time, errText, source string, n int) []hookbox.Event {
	t.Helper()
	ctx := context.Background()
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("seed-", claimSeq.Add(1)), Limit: n,
		Lease: time.Minute, Sources: []string{source}})
	if err != nil || len(evs) != n {
		t.Fatalf("claim: %d of %d, %v", len(evs), n, err)
	}
	if st == hookbox.StatusProcessing {
		return evs
	}
	outs := make([]hookbox.Outcome, len(evs))
	for i, e := range evs {
		outs[i] = outcome(e, st, at)
		outs[i].Error = errText
	}
	errs, err := s.Finish(ctx, outs)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("finish %d: %v", i, err)
		}
	}
	return evs
}

// testReplayMany: a filter matching more events than one replay
// transaction takes (SQLite works in batches of 1000) replays each of them
// once, and the dry run counts the same.
func testReplayMany(t *testing.T, s FullStore) {
	ids := make([]string, 2345)
	for i := range ids {
		ids[i] = fmt.Sprint("m", i)
	}
	want := finishAs(t, s, "many", hookbox.StatusDead, time.Now(), ids...)
	finishAs(t, s, "other", hookbox.StatusDead, time.Now(), "x")
	f := hookbox.ReplayParams{Filter: hookbox.Filter{Source: "many"}}
	f.DryRun = true
	if dry := replay(t, s, f); len(dry.Replayed) != len(want) {
		t.Fatalf("dry run found %d, want %d", len(dry.Replayed), len(want))
	}
	f.DryRun = false
	res := replay(t, s, f)
	slices.Sort(want)
	if !slices.Equal(res.Replayed, want) {
		t.Fatalf("replayed %d events, want %d, each once", len(res.Replayed), len(want))
	}
	if n := count(t, s, hookbox.Filter{Source: "many", Status: hookbox.StatusPending}); n != len(want) {
		t.Errorf("pending after replay = %d, want %d", n, len(want))
	}
	if n := count(t, s, hookbox.Filter{Source: "other", Status: hookbox.StatusDead}); n != 1 {
		t.Errorf("an event outside the filter was replayed")
	}
}

// testReplayStoppedPartWay: a replay by filter whose context is
// cancelled once its first slice has committed (the stores replay 1000
// events a transaction and call Progress after each commit) returns the
// error with what the committed slice replayed, exactly the events now
// pending, and where it stopped (ResumeAfter). Going on from there
// (AfterID) replays the rest and none of the first slice again, though
// they are pending and the filter takes pending events; the same replay
// of dead events run again replays the rest too. A dry run from there
// lists the rest, and a dry run that fails says nowhere to resume.
func testReplayStoppedPartWay(t *testing.T, s FullStore) {
	for _, c := range []struct {
		source string
		again  func(stopped hookbox.ReplayResult) hookbox.ReplayParams
	}{
		{"part-resume", func(stopped hookbox.ReplayResult) hookbox.ReplayParams {
			return hookbox.ReplayParams{Filter: hookbox.Filter{Source: "part-resume"}, AfterID: *stopped.ResumeAfter}
		}},
		{"part-dead", func(hookbox.ReplayResult) hookbox.ReplayParams {
			return hookbox.ReplayParams{Filter: hookbox.Filter{Source: "part-dead", Status: hookbox.StatusDead}}
		}},
	} {
		t.Run(c.source, func(t *testing.T) {
			ids := make([]string, 1500)
			for i := range ids {
				ids[i] = fmt.Sprint("s", i)
			}
			want := finishAs(t, s, c.source, hookbox.StatusDead, time.Now(), ids...)
			slices.Sort(want)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped, err := s.Replay(ctx, hookbox.ReplayParams{Filter: hookbox.Filter{Source: c.source},
				Progress: func(n int) {
					if n > 0 {
						cancel()
					}
				}})
			if err == nil {
				t.Fatalf("a replay cancelled after its first slice returned no error (replayed %d)", len(stopped.Replayed))
			}
			pending := func() []int64 {
				t.Helper()
				es, err := s.Events(context.Background(), hookbox.Filter{Source: c.source, Status: hookbox.StatusPending, Limit: 1 << 30})
				if err != nil {
					t.Fatalf("Events: %v", err)
				}
				var got []int64
				for _, e := range es {
					got = append(got, e.ID)
				}
				slices.Sort(got)
				return got
			}
			if len(stopped.Replayed) == 0 || len(stopped.Replayed) >= len(want) {
				t.Fatalf("stopped after %d of %d events, want after its first slice", len(stopped.Replayed), len(want))
			}
			if got := pending(); !slices.Equal(got, stopped.Replayed) {
				t.Fatalf("the result says %d replayed (%v…), the store holds %d pending", len(stopped.Replayed), stopped.Replayed[:3], len(got))
			}
			done := len(stopped.Replayed)
			if stopped.ResumeAfter == nil || *stopped.ResumeAfter != want[done-1] {
				t.Fatalf("ResumeAfter = %v, want %d, the last id of the committed slice", stopped.ResumeAfter, want[done-1])
			}
			p := c.again(stopped)
			p.DryRun = true
			if dry := replay(t, s, p); !slices.Equal(dry.Replayed, want[done:]) {
				t.Errorf("the dry run of going on lists %d events, want the %d not replayed", len(dry.Replayed), len(want)-done)
			}
			p.DryRun = false
			if rest := replay(t, s, p); !slices.Equal(rest.Replayed, want[done:]) || rest.ResumeAfter != nil {
				t.Errorf("going on replayed %d events (%v…), want the %d the first run left, none twice; ResumeAfter %v",
					len(rest.Replayed), rest.Replayed[:min(3, len(rest.Replayed))], len(want)-done, rest.ResumeAfter)
			}
			if got := pending(); !slices.Equal(got, want) {
				t.Errorf("%d of %d events pending after going on", len(got), len(want))
			}
		})
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := s.Replay(gone, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "part-dead"}, DryRun: true}); err == nil || res.ResumeAfter != nil {
		t.Errorf("a cancelled dry run: err %v, ResumeAfter %v; want an error and no place to resume", err, res.ResumeAfter)
	}
}

// testReplayRefusesClearedPayload: an event whose payload payload retention
// cleared is never replayed (it would be sent with an empty body under the
// original signature headers): named, it is reported in NoPayload; by
// filter it is left out and counted there; dry runs say the same. Event
// and Events say the payload was cleared.
func testReplayRefusesClearedPayload(t *testing.T, s FullStore) {
	ctx := context.Background()
	cleared := finishAs(t, s, "np", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "1")
	if n, err := s.ClearPayloads(ctx, time.Now().Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("ClearPayloads = %d, %v", n, err)
	}
	kept := finishAs(t, s, "np", hookbox.StatusDone, time.Now(), "2")
	dead := finishAs(t, s, "np", hookbox.StatusDead, time.Now(), "3")

	if e := status(t, s, cleared[0]); !e.PayloadCleared || e.Payload != nil {
		t.Errorf("Event of a cleared payload: PayloadCleared %v, payload %q", e.PayloadCleared, e.Payload)
	}
	if e := status(t, s, kept[0]); e.PayloadCleared {
		t.Errorf("Event with its payload says PayloadCleared")
	}
	evs, err := s.Events(ctx, hookbox.Filter{Source: "np"})
	if err != nil || len(evs) != 3 {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	for _, e := range evs {
		if want := e.ID == cleared[0]; e.PayloadCleared != want {
			t.Errorf("Events: event %d PayloadCleared = %v, want %v", e.ID, e.PayloadCleared, want)
		}
	}

	named := hookbox.ReplayParams{IDs: []int64{cleared[0], kept[0], dead[0]}, IncludeDone: true}
	bulk := hookbox.ReplayParams{Filter: hookbox.Filter{Source: "np"}, IncludeDone: true}
	want := []int64{kept[0], dead[0]}
	slices.Sort(want)
	for _, p := range []hookbox.ReplayParams{named, bulk} {
		p.DryRun = true
		res := replay(t, s, p)
		if !slices.Equal(res.Replayed, want) || !slices.Equal(res.NoPayload, cleared) || len(res.Skipped) != 0 {
			t.Errorf("dry replay (ids %v) = %+v, want replayed %v, no payload %v", p.IDs, res, want, cleared)
		}
	}
	for _, id := range slices.Concat(cleared, kept) {
		if e := status(t, s, id); e.Status != hookbox.StatusDone {
			t.Fatalf("dry run changed event %d to %s", id, e.Status)
		}
	}
	res := replay(t, s, named)
	if !slices.Equal(res.Replayed, want) || !slices.Equal(res.NoPayload, cleared) || len(res.Skipped) != 0 {
		t.Errorf("replay = %+v, want replayed %v, no payload %v", res, want, cleared)
	}
	if e := status(t, s, cleared[0]); e.Status != hookbox.StatusDone || !e.PayloadCleared {
		t.Errorf("event without payload after replay: %+v", e)
	}
	res = replay(t, s, bulk)
	if len(res.Replayed) != 2 || !slices.Equal(res.NoPayload, cleared) {
		t.Errorf("bulk replay = %+v, want the 2 pending again and %v without payload", res, cleared)
	}
	if e := status(t, s, cleared[0]); e.Status != hookbox.StatusDone {
		t.Errorf("bulk replay changed the event without payload to %s", e.Status)
	}
	// Without IncludeDone the done event is skipped as done, as before.
	res = replay(t, s, hookbox.ReplayParams{IDs: cleared})
	if len(res.Replayed) != 0 || !slices.Equal(res.Skipped, cleared) {
		t.Errorf("replay without IncludeDone = %+v", res)
	}
}

// testEmptyPayloadIsNotCleared: a delivery with an empty body (nil or zero
// bytes) is stored as an empty payload, never as a cleared one: Event
// returns it as zero bytes (not nil), and it can be replayed.
func testEmptyPayloadIsNotCleared(t *testing.T, s FullStore) {
	ctx := context.Background()
	nilBody, emptyBody := Delivery("empty", "nil"), Delivery("empty", "zero")
	nilBody.Payload, emptyBody.Payload = nil, []byte{}
	ids := Seed(t, s, hookbox.StatusDead, time.Now(), "failed for the test", nilBody, emptyBody)
	for _, id := range ids {
		e := status(t, s, id)
		if e.PayloadCleared || e.Payload == nil || len(e.Payload) != 0 {
			t.Errorf("event %d with an empty body: PayloadCleared %v, payload %#v", id, e.PayloadCleared, e.Payload)
		}
	}
	evs, err := s.Events(ctx, hookbox.Filter{Source: "empty"})
	if err != nil || len(evs) != 2 {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	for _, e := range evs {
		if e.PayloadCleared {
			t.Errorf("Events: event %d with an empty body says PayloadCleared", e.ID)
		}
	}
	res := replay(t, s, hookbox.ReplayParams{IDs: ids})
	if !slices.Equal(res.Replayed, ids) || len(res.NoPayload) != 0 {
		t.Errorf("replay of empty bodies = %+v, want %v replayed", res, ids)
	}
}

// testProgress: Purge reports its running totals after each batch it
// commits, and Replay the number replayed so far at least once; the last
// report is the result.
func testProgress(t *testing.T, s FullStore) {
	old := time.Now().Add(-48 * time.Hour)
	finishAs(t, s, "prog", hookbox.StatusDone, old, "1", "2", "3", "4", "5")
	ingestNewer(t, s)
	var purged []hookbox.PurgeResult
	res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now(), BatchSize: 2,
		Progress: func(r hookbox.PurgeResult) { purged = append(purged, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(purged) < 3 || purged[len(purged)-1] != res || purged[0].Done != 2 || purged[1].Done != 4 {
		t.Errorf("purge progress %+v for result %+v, want 2, 4, then 5 done", purged, res)
	}

	finishAs(t, s, "prog-r", hookbox.StatusDead, time.Now(), "a", "b", "c")
	var replayed []int
	rr := replay(t, s, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "prog-r"}, Progress: func(n int) { replayed = append(replayed, n) }})
	if len(replayed) == 0 || replayed[len(replayed)-1] != len(rr.Replayed) || len(rr.Replayed) != 3 || !slices.IsSorted(replayed) {
		t.Errorf("replay progress %v for %d replayed", replayed, len(rr.Replayed))
	}
}

// OlderFirstAttemptRow checks a store over a database written before a
// first attempt that succeeds went without a row (hookbox.AttemptStored):
// write inserts, as such a build did, the row of an event's first attempt,
// done at `at` by owner "older". The attempt is listed once, and a replay
// does not write it again.
func OlderFirstAttemptRow(t *testing.T, s FullStore, write func(eventID int64, at time.Time) error) {
	t.Helper()
	ingest(t, s, Delivery("older", "1"))
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ev := claim(t, s, time.Now(), 1, "older")[0]
	finish(t, s, outcome(ev, hookbox.StatusDone, at))
	if err := write(ev.ID, at); err != nil {
		t.Fatal(err)
	}
	outcomes := func() []string {
		t.Helper()
		as, err := s.Attempts(context.Background(), ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, fmt.Sprintf("%d %s %s", a.Attempt, a.Owner, a.Outcome))
		}
		return out
	}
	if got := outcomes(); !slices.Equal(got, []string{"1 older done"}) {
		t.Errorf("attempts %q, want the older build's row alone", got)
	}
	replay(t, s, hookbox.ReplayParams{IDs: []int64{ev.ID}, IncludeDone: true})
	if got := outcomes(); !slices.Equal(got, []string{"1 older done", "1 operator replay"}) {
		t.Errorf("after a replay: attempts %q, want the older row and the replay", got)
	}
}

// testDiedAttemptIsNotDone: a first attempt whose process died during it
// leaves no row; once the second succeeds, the history lists the first as
// unknown (hookbox.AttemptUnknown), never as a success read from the
// event, and a replay does not write such a success down either. The
// second of two attempts that left no row, on an event still processing
// with its lease run out, is not listed: the event is not worked again yet.
func testDiedAttemptIsNotDone(t *testing.T, s FullStore) {
	ctx := context.Background()
	ingest(t, s, Delivery("died", "1"))
	now := time.Now().Truncate(time.Millisecond)
	claim(t, s, now, 1, "died") // attempt 1: its process dies, nothing is recorded
	ev := claim(t, s, now.Add(2*time.Minute), 1, "died")[0]
	finish(t, s, outcome(ev, hookbox.StatusDone, now.Add(3*time.Minute)))
	check := func(when string, want ...hookbox.Attempt) {
		t.Helper()
		as, err := s.Attempts(ctx, ev.ID)
		if err != nil {
			t.Fatalf("%s: attempts: %v", when, err)
		}
		for _, a := range as {
			if a.Attempt == 1 && a.Outcome == hookbox.AttemptDone {
				t.Fatalf("%s: attempt 1, which died with its process, is listed as done: %+v", when, as)
			}
		}
		if len(as) != len(want) {
			t.Fatalf("%s: attempts %+v; want %d", when, as, len(want))
		}
		if u := as[0]; u.Outcome == hookbox.AttemptUnknown && (u.Error != hookbox.UnknownAttemptError || !u.StartedAt.IsZero()) {
			t.Errorf("%s: the unknown attempt reads %+v", when, u)
		}
		for i, w := range want {
			if a := as[i]; a.Attempt != w.Attempt || a.Outcome != w.Outcome {
				t.Errorf("%s: attempt %d is #%d %s, want #%d %s (all: %+v)", when, i, a.Attempt, a.Outcome, w.Attempt, w.Outcome, as)
			}
		}
	}
	unknown1 := hookbox.Attempt{Attempt: 1, Outcome: hookbox.AttemptUnknown}
	done2 := hookbox.Attempt{Attempt: 2, Outcome: hookbox.AttemptDone}
	check("done on attempt 2", unknown1, done2)
	replay(t, s, hookbox.ReplayParams{IDs: []int64{ev.ID}, IncludeDone: true})
	check("after a replay", unknown1, done2, hookbox.Attempt{Attempt: 2, Outcome: hookbox.AttemptReplay})

	// Two attempts die in a row, on an event processing under a lease
	// that has run out: the first is unknown, the second is the event's
	// current attempt as far as the store knows, and not listed.
	ingest(t, s, Delivery("died2", "1"))
	now = time.Now()
	claim(t, s, now, 1, "died2")
	ev2 := claim(t, s, now.Add(2*time.Minute), 1, "died2")[0]
	if as, err := s.Attempts(ctx, ev2.ID); err != nil || len(as) != 1 || as[0].Outcome != hookbox.AttemptUnknown {
		t.Fatalf("processing after a died attempt: attempts %+v, %v", as, err)
	}
}

// testRaiseIDFloor: after RaiseIDFloor, the next events get ids above the
// floor asked for (an id, or a gap past the largest id known), never
// below an id handed out before; a floor already passed changes nothing.
// What holds the floor is no event: Stats count the same before and
// after, and once the next event is stored, the list holds the events
// stored and nothing else.
func testRaiseIDFloor(t *testing.T, s FullStore) {
	ctx := context.Background()
	raise := func(p hookbox.IDFloorParams) hookbox.IDFloor {
		t.Helper()
		f, err := s.RaiseIDFloor(ctx, p)
		if err != nil {
			t.Fatalf("RaiseIDFloor(%+v): %v", p, err)
		}
		return f
	}
	ids := func(rs []hookbox.Receipt) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	stored := ids(ingest(t, s, Delivery("floor", "1"), Delivery("floor", "2")))
	last := stored[1]
	statsBefore, err := s.Stats(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	f := raise(hookbox.IDFloorParams{After: last + 500})
	if !f.Moved || f.Known < last || f.Floor != last+500 {
		t.Fatalf("floor after %d: %+v", last+500, f)
	}
	statsAfter, err := s.Stats(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(statsBefore.ByStatus, statsAfter.ByStatus) {
		t.Errorf("Stats changed with the floor: %v, then %v", statsBefore.ByStatus, statsAfter.ByStatus)
	}
	next := ingest(t, s, Delivery("floor", "3"))[0].ID
	if next <= last+500 {
		t.Fatalf("the next id is %d, not above the floor %d", next, last+500)
	}
	stored = append(stored, next)
	evs, err := s.Events(ctx, hookbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []int64
	for _, e := range evs {
		listed = append(listed, e.ID)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, stored) {
		t.Errorf("listed %v after the next event, want the events stored, %v", listed, stored)
	}

	f = raise(hookbox.IDFloorParams{Gap: 1000})
	if !f.Moved || f.Known < next || f.Floor != f.Known+1000 {
		t.Fatalf("floor with a gap of 1000 past %d: %+v", next, f)
	}
	if id := ingest(t, s, Delivery("floor", "4"))[0].ID; id <= f.Floor {
		t.Fatalf("the next id is %d, not above the floor %d", id, f.Floor)
	} else {
		next = id
	}

	f = raise(hookbox.IDFloorParams{After: 1})
	if f.Moved || f.Floor != f.Known || f.Known < next {
		t.Fatalf("a floor below the ids known: %+v", f)
	}
	if id := ingest(t, s, Delivery("floor", "5"))[0].ID; id <= next {
		t.Fatalf("after a floor below the ids known, the next id is %d, not above %d", id, next)
	}
	if _, err := s.RaiseIDFloor(ctx, hookbox.IDFloorParams{Gap: -1}); err == nil {
		t.Error("a negative gap was taken")
	}
}

// testClearWaitsForLateDeliveries: payload retention clears an event last
// changed before the window; a fan-out event whose delivery finished just
// now keeps its data, though it was stored long before, as a purge keeps
// it. Its own row's time is when it was stored, and clearing went by
// that alone.
func testClearWaitsForLateDeliveries(t *testing.T, s FullStore) {
	ctx := context.Background()
	d := Delivery("late", "1")
	d.FanOut = true
	d.Routes = []hookbox.Route{{Target: "a"}}
	d.ReceivedAt = time.Now().Add(-48 * time.Hour)
	rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "late", Limit: 1, Lease: time.Minute, Sources: []string{"late/a"}, Now: now})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %v, %v", evs, err)
	}
	a := evs[0]
	if _, err := s.Finish(ctx, []hookbox.Outcome{{ID: a.ID, Owner: a.LeaseOwner, Attempt: a.Attempts, Status: hookbox.StatusDone,
		RetryAt: now, StartedAt: now, FinishedAt: now}}); err != nil {
		t.Fatal(err)
	}
	dayAgo := time.Now().Add(-24 * time.Hour)
	if n, err := s.ClearPayloads(ctx, dayAgo); err != nil || n != 0 {
		t.Errorf("ClearPayloads a day back = %d, %v; want 0 (the event's delivery finished just now)", n, err)
	}
	if e, err := s.Event(ctx, rs[0].ID); err != nil || e.PayloadCleared || len(e.Header) == 0 {
		t.Errorf("the event whose delivery finished just now: cleared %v, %d headers, %v; want its payload and headers kept", e.PayloadCleared, len(e.Header), err)
	}
	if res, err := s.Purge(ctx, hookbox.PurgeParams{Before: dayAgo}); err != nil || res.Total() != 0 {
		t.Errorf("purge a day back = %+v, %v; want nothing purged", res, err)
	}
	// A day later, by the cutoff, it is cleared.
	if n, err := s.ClearPayloads(ctx, time.Now()); err != nil || n == 0 {
		t.Errorf("ClearPayloads up to now = %d, %v; want the event cleared", n, err)
	}
}
