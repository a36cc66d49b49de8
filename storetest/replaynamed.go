package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testReplayFanOutReportsEachDelivery: a replay of a named FanOut event
// reports, by its own id in Skipped, each delivery it left alone (one in
// flight, one done without IncludeDone), whether or not another delivery
// was replayed; a dry run says the same. Before, Skipped was [] as soon as
// one delivery was replayed, so a delivery in flight was silently left
// out of a replay the operator asked for.
func testReplayFanOutReportsEachDelivery(t *testing.T, s FullStore) {
	parent := ingest(t, s, fanOut("rfo", "1", "a", "b", "c"))[0].ID
	running := claim(t, s, time.Now(), 1, "rfo/a")[0]
	done := claim(t, s, time.Now(), 1, "rfo/b")[0]
	dead := claim(t, s, time.Now(), 1, "rfo/c")[0]
	finish(t, s, outcome(done, hookbox.StatusDone, time.Now()), outcome(dead, hookbox.StatusDead, time.Now()))

	check := func(name string, res hookbox.ReplayResult, replayed, skipped []int64) {
		t.Helper()
		if !slices.Equal(res.Replayed, replayed) || !slices.Equal(res.Skipped, skipped) || len(res.NoPayload) != 0 {
			t.Errorf("%s: %+v; want replayed %v, skipped %v", name, res, replayed, skipped)
		}
	}
	named := []int64{parent}
	check("dry run without include_done", replay(t, s, hookbox.ReplayParams{IDs: named, DryRun: true}),
		[]int64{dead.ID}, []int64{running.ID, done.ID})
	check("dry run with include_done", replay(t, s, hookbox.ReplayParams{IDs: named, IncludeDone: true, DryRun: true}),
		[]int64{done.ID, dead.ID}, []int64{running.ID})
	check("without include_done", replay(t, s, hookbox.ReplayParams{IDs: named}),
		[]int64{dead.ID}, []int64{running.ID, done.ID})
	check("with include_done", replay(t, s, hookbox.ReplayParams{IDs: named, IncludeDone: true}),
		[]int64{done.ID, dead.ID}, []int64{running.ID})
	if e := status(t, s, running.ID); e.Status != hookbox.StatusProcessing || e.LeaseOwner != running.LeaseOwner {
		t.Errorf("the delivery in flight was touched: %+v", e)
	}
	// Naming the delivery too lists it once.
	check("the event and its delivery in flight", replay(t, s, hookbox.ReplayParams{IDs: []int64{parent, running.ID}, IncludeDone: true}),
		[]int64{done.ID, dead.ID}, []int64{running.ID})

	// None replayed: the event is listed, then its delivery.
	alone := ingest(t, s, fanOut("rfo", "2", "a"))[0].ID
	inFlight := claim(t, s, time.Now(), 1, "rfo/a")[0]
	if inFlight.Parent != alone {
		t.Fatalf("claimed %+v, want the delivery of %d", inFlight, alone)
	}
	check("an event whose one delivery runs", replay(t, s, hookbox.ReplayParams{IDs: []int64{alone}, IncludeDone: true}),
		nil, []int64{alone, inFlight.ID})
}

// testReplayExpectsWhatWasSeen: a replay with Expect replays a named event
// only while its attempts are the number the operator saw. Two replays of
// a done event that expect the same number run it once: the second, made
// after the first replay's run, is skipped and changes nothing; one made
// before that run folds into it. For a FanOut event the number is the sum
// over its deliveries (ReplayAttempts), and a mismatch skips every one of
// them. A dry run judges the same.
func testReplayExpectsWhatWasSeen(t *testing.T, s FullStore) {
	ctx := context.Background()
	id := ingest(t, s, Delivery("rx", "1"))[0].ID
	ev := claim(t, s, time.Now(), 1, "rx")[0]
	finish(t, s, outcome(ev, hookbox.StatusDone, time.Now()))
	seen := status(t, s, id)
	if seen.Attempts != 1 {
		t.Fatalf("done after one attempt: %+v", seen)
	}
	want := func(name string, res hookbox.ReplayResult, replayed, skipped []int64) {
		t.Helper()
		if !slices.Equal(res.Replayed, replayed) || !slices.Equal(res.Skipped, skipped) {
			t.Errorf("%s: %+v; want replayed %v, skipped %v", name, res, replayed, skipped)
		}
	}
	expect := map[int64]int{id: hookbox.ReplayAttempts(seen, nil)}
	p := hookbox.ReplayParams{IDs: []int64{id}, IncludeDone: true, Expect: expect}
	want("first replay", replay(t, s, p), []int64{id}, nil)
	want("second, before the run", replay(t, s, p), []int64{id}, nil)
	ev = claim(t, s, time.Now(), 1, "rx")[0]
	finish(t, s, outcome(ev, hookbox.StatusDone, time.Now()))
	dry := p
	dry.DryRun = true
	want("dry run after the run", replay(t, s, dry), nil, []int64{id})
	want("third, after the run", replay(t, s, p), nil, []int64{id})
	now := status(t, s, id)
	if now.Status != hookbox.StatusDone || now.Attempts != 2 {
		t.Fatalf("after a replay that expected what it no longer is: %+v; want done after 2 attempts", now)
	}
	if have, changed := hookbox.ChangedSince(expect, now, nil); !changed || have != 2 {
		t.Errorf("ChangedSince = %d, %v; want 2, true", have, changed)
	}
	if _, changed := hookbox.ChangedSince(map[int64]int{id: 2}, now, nil); changed {
		t.Error("ChangedSince says an event changed whose attempts are as expected")
	}
	p.Expect = map[int64]int{id: 2}
	want("replay expecting what it is", replay(t, s, p), []int64{id}, nil)

	// A FanOut event: the sum over its deliveries.
	parent := ingest(t, s, fanOut("rxf", "1", "a", "b"))[0].ID
	a := claim(t, s, time.Now(), 1, "rxf/a")[0]
	b := claim(t, s, time.Now(), 1, "rxf/b")[0]
	finish(t, s, outcome(a, hookbox.StatusDone, time.Now()), outcome(b, hookbox.StatusDone, time.Now()))
	ds, err := s.Events(ctx, hookbox.Filter{Parent: parent})
	if err != nil || len(ds) != 2 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	fan := status(t, s, parent)
	if n := hookbox.ReplayAttempts(fan, ds); n != 2 {
		t.Fatalf("ReplayAttempts of a FanOut event with two deliveries done once each = %d, want 2", n)
	}
	p = hookbox.ReplayParams{IDs: []int64{parent}, IncludeDone: true, Expect: map[int64]int{parent: 2}}
	want("FanOut event as seen", replay(t, s, p), []int64{a.ID, b.ID}, nil)
	a = claim(t, s, time.Now(), 1, "rxf/a")[0]
	finish(t, s, outcome(a, hookbox.StatusDone, time.Now()))
	want("FanOut event after a delivery ran again", replay(t, s, p), nil, []int64{parent, a.ID, b.ID})
	if e := status(t, s, a.ID); e.Status != hookbox.StatusDone || e.Attempts != 2 {
		t.Errorf("delivery a after the skipped replay: %+v", e)
	}
	// Expect says nothing of an id it does not name.
	p.Expect = map[int64]int{987654: 0}
	want("Expect of another id", replay(t, s, p), []int64{a.ID, b.ID}, nil)
}
