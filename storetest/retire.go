package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testRetireTarget: the queue names with unfinished deliveries are
// listed, each once, and counted; retiring one ends its pending
// deliveries and those whose lease has ended as dead, with the reason as
// their last error and an attempt row by the operator, and leaves alone
// one a live lease holds (whose worker can still finish it) and every
// other name. The FanOut event of retired deliveries is then dead and
// purged with dead events; a retired delivery can be replayed.
func testRetireTarget(t *testing.T, s FullStore) {
	ctx := context.Background()
	start := time.Now()
	rs := ingest(t, s, fanOut("rt", "1", "gone", "kept"), fanOut("rt", "2", "gone", "kept"), fanOut("rt", "3", "gone"),
		fanOut("rt", "4", "gone"), Delivery("rt-old", "x"))
	// A lease that ends at once (its worker died), and a live one.
	ended, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("test-", claimSeq.Add(1)), Limit: 1,
		Lease: time.Millisecond, Sources: []string{"rt/gone"}})
	if err != nil {
		t.Fatal(err)
	}
	live := claim(t, s, time.Now(), 1, "rt/gone")
	if len(ended) != 1 || len(live) != 1 {
		t.Fatalf("claimed %d and %d, want 1 and 1", len(ended), len(live))
	}
	p := hookbox.RetireParams{Name: "rt/gone", Reason: hookbox.RetireReason("rt/gone"), DryRun: true}
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := s.RetireTarget(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ended == 3 {
			break // the short lease has ended, on the store's clock
		}
		if time.Now().After(deadline) {
			t.Fatalf("dry retire = %+v 10 s after a lease of 1 ms began; want 3 ended", res)
		}
	}

	names, err := s.UnfinishedTargets(ctx)
	if err != nil || !slices.Equal(names, []string{"rt-old", "rt/gone", "rt/kept"}) {
		t.Fatalf("UnfinishedTargets = %q, %v; want rt-old, rt/gone, rt/kept", names, err)
	}
	b, err := s.TargetBacklog(ctx, "rt/gone", time.Now())
	if err != nil || b.Name != "rt/gone" || b.Pending != 2 || b.Processing != 2 || b.Unfinished() != 4 ||
		b.OldestDue.IsZero() || b.OldestDue.Before(start.Add(-time.Minute)) {
		t.Fatalf("backlog of rt/gone = %+v, %v; want 2 pending, 2 processing, due since the test began", b, err)
	}
	if b, err := s.TargetBacklog(ctx, "rt/none", time.Now()); err != nil || b.Unfinished() != 0 || !b.OldestDue.IsZero() {
		t.Fatalf("backlog of a name without deliveries = %+v, %v", b, err)
	}

	if res, err := s.RetireTarget(ctx, p); err != nil || res != (hookbox.RetireResult{Ended: 3, InFlight: 1}) {
		t.Fatalf("dry retire = %+v, %v; want 3 ended, 1 in flight", res, err)
	}
	if b, _ := s.TargetBacklog(ctx, "rt/gone", time.Now()); b.Unfinished() != 4 {
		t.Fatalf("a dry retire changed the backlog: %+v", b)
	}
	p.DryRun = false
	var progress []int
	p.Progress = func(n int) { progress = append(progress, n) }
	res, err := s.RetireTarget(ctx, p)
	if err != nil || res != (hookbox.RetireResult{Ended: 3, InFlight: 1}) || len(progress) == 0 || progress[len(progress)-1] != 3 {
		t.Fatalf("retire = %+v, %v (progress %v); want 3 ended, 1 in flight", res, err, progress)
	}
	gone, err := s.Events(ctx, hookbox.Filter{Source: "rt/gone", Limit: 10})
	if err != nil || len(gone) != 4 {
		t.Fatalf("deliveries of rt/gone: %d, %v", len(gone), err)
	}
	for _, d := range gone {
		want := hookbox.StatusDead
		if d.ID == live[0].ID {
			want = hookbox.StatusProcessing
		}
		if d.Status != want {
			t.Errorf("delivery %d is %s, want %s", d.ID, d.Status, want)
		}
		if want == hookbox.StatusDead && d.LastError != p.Reason {
			t.Errorf("delivery %d's last error = %q, want %q", d.ID, d.LastError, p.Reason)
		}
	}
	as, err := s.Attempts(ctx, ended[0].ID)
	if err != nil || len(as) == 0 {
		t.Fatalf("attempts of a retired delivery: %+v, %v", as, err)
	}
	if a := as[len(as)-1]; a.Owner != "operator" || a.Outcome != hookbox.AttemptDead || a.Error != p.Reason || a.Attempt != 1 {
		t.Errorf("the last attempt of a retired delivery = %+v, want attempt 1 by the operator, dead, with the reason", a)
	}
	// The live worker's finish is still applied: retire never took its row.
	if errs := finish(t, s, outcome(live[0], hookbox.StatusDone, time.Now())); errs[0] != nil {
		t.Errorf("the finish of a delivery retire left alone: %v", errs[0])
	}
	if names, _ := s.UnfinishedTargets(ctx); !slices.Equal(names, []string{"rt-old", "rt/kept"}) {
		t.Errorf("after the retire, UnfinishedTargets = %q; want rt-old, rt/kept", names)
	}
	if b, _ := s.TargetBacklog(ctx, "rt/kept", time.Now()); b.Pending != 2 {
		t.Errorf("retiring rt/gone changed rt/kept: %+v", b)
	}
	for i, want := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusPending, hookbox.StatusDead, hookbox.StatusDead} {
		if ev := status(t, s, rs[i].ID); ev.Status != want {
			t.Errorf("event %d is %s, want %s", i+1, ev.Status, want)
		}
	}

	// The events whose deliveries are all retired go with a purge of dead
	// events, as soon as the cut-off is past the retire.
	retired := time.Now()
	ingestNewer(t, s) // a purge keeps the newest event (see PurgeNeverHandsOutIDsAgain)
	for !time.Now().After(retired.Add(2 * time.Millisecond)) {
	}
	pr, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now(), IncludeDead: true, DryRun: true})
	if err != nil || pr.Dead != 2 {
		t.Errorf("purge of dead events after the retire would delete %+v, %v; want the 2 events of retired deliveries", pr, err)
	}
	rr := replay(t, s, hookbox.ReplayParams{IDs: []int64{ended[0].ID}})
	if !slices.Equal(rr.Replayed, []int64{ended[0].ID}) || status(t, s, ended[0].ID).Status != hookbox.StatusPending {
		t.Errorf("replay of a retired delivery: %+v", rr)
	}

	// A source worked as itself is retired by its name.
	if res, err := s.RetireTarget(ctx, hookbox.RetireParams{Name: "rt-old", Reason: "gone"}); err != nil || res.Ended != 1 {
		t.Errorf("retire of a source = %+v, %v", res, err)
	}
	if res, err := s.RetireTarget(ctx, hookbox.RetireParams{Name: "rt-old", Reason: "gone"}); err != nil || res != (hookbox.RetireResult{}) {
		t.Errorf("a second retire = %+v, %v; want nothing", res, err)
	}
}

// testRetireManyInSlices: a retire of more deliveries than one slice
// takes ends every one of them, slice by slice.
func testRetireManyInSlices(t *testing.T, s FullStore) {
	const n = 2100
	var ds []hookbox.Delivery
	for i := range n {
		ds = append(ds, Delivery("rm", fmt.Sprint(i)))
	}
	ingest(t, s, ds...)
	var progress []int
	res, err := s.RetireTarget(context.Background(), hookbox.RetireParams{Name: "rm", Reason: "gone",
		Progress: func(n int) { progress = append(progress, n) }})
	if err != nil || res.Ended != n || res.InFlight != 0 {
		t.Fatalf("retire = %+v, %v; want %d ended", res, err, n)
	}
	if len(progress) < 3 || !slices.IsSorted(progress) || progress[len(progress)-1] != n {
		t.Errorf("progress %v, want at least three slices up to %d", progress, n)
	}
	if dead := count(t, s, hookbox.Filter{Source: "rm", Status: hookbox.StatusDead, Limit: 10000}); dead != n {
		t.Errorf("%d dead after the retire, want %d", dead, n)
	}
}

// testRetireKeepsUnknownAttempt: a delivery whose last attempt left no row
// (its process died, and its lease has ended) still lists that attempt as
// unknown once RetireTarget has ended it: the retire's row, numbered with
// that attempt, is a mark in its history, not the attempt's outcome. So
// are the rows of a replay and of a skip that follow it, and a later
// death and retire is listed the same way.
func testRetireKeepsUnknownAttempt(t *testing.T, s FullStore) {
	ctx := context.Background()
	history := func(id int64) string {
		t.Helper()
		as, err := s.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		h := ""
		for _, a := range as {
			h += fmt.Sprintf("%d %s", a.Attempt, a.Outcome)
			if a.Owner == hookbox.OperatorOwner {
				h += " by the operator"
			}
			h += "; "
		}
		return h
	}
	// dies claims id's queue name with a lease of a millisecond, and its
	// worker dies, recording nothing.
	dies := func(name string, id int64) {
		t.Helper()
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("test-", claimSeq.Add(1)), Limit: 1,
			Lease: time.Millisecond, Sources: []string{name}})
		if err != nil || len(evs) != 1 || evs[0].ID != id {
			t.Fatalf("claim of %s: %v, %v; want event %d", name, evs, err, id)
		}
	}
	// retire ends name's one delivery once its lease has ended, on the
	// store's clock.
	retire := func(name string) {
		t.Helper()
		p := hookbox.RetireParams{Name: name, Reason: hookbox.RetireReason(name), DryRun: true}
		for deadline := time.Now().Add(10 * time.Second); ; {
			res, err := s.RetireTarget(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Ended == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("dry retire of %s = %+v 10 s after a lease of 1 ms began; want 1 ended", name, res)
			}
		}
		p.DryRun = false
		res, err := s.RetireTarget(ctx, p)
		if err != nil || res.Ended != 1 {
			t.Fatalf("retire of %s = %+v, %v; want 1 ended", name, res, err)
		}
	}

	// A first attempt that died, retired.
	id := ingest(t, s, Delivery("ru-first", "1"))[0].ID
	dies("ru-first", id)
	retire("ru-first")
	if got, want := history(id), "1 unknown; 1 dead by the operator; "; got != want {
		t.Errorf("history of a delivery retired after its first attempt died:\n got %q\nwant %q", got, want)
	}

	// A retry recorded, then an attempt that died, retired, replayed; then
	// one more that died, retired.
	id = ingest(t, s, Delivery("ru-later", "1"))[0].ID
	evs := claim(t, s, time.Now(), 1, "ru-later")
	if len(evs) != 1 {
		t.Fatalf("claimed %d, want 1", len(evs))
	}
	if errs := finish(t, s, outcome(evs[0], hookbox.StatusPending, time.Now())); errs[0] != nil {
		t.Fatal(errs[0])
	}
	dies("ru-later", id)
	retire("ru-later")
	replay(t, s, hookbox.ReplayParams{IDs: []int64{id}})
	dies("ru-later", id)
	retire("ru-later")
	want := "1 retry; 2 unknown; 2 dead by the operator; 2 replay by the operator; 3 unknown; 3 dead by the operator; "
	if got := history(id); got != want {
		t.Errorf("history of a delivery retired twice after attempts that died:\n got %q\nwant %q", got, want)
	}

	// A delivery that holds an order key, retired after its attempt died,
	// then skipped.
	ingest(t, s, Keyed("ru-skip", "t", "1", "K"))
	ds, err := s.Events(ctx, hookbox.Filter{Source: "ru-skip/t"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v, %v", ds, err)
	}
	id = ds[0].ID
	dies("ru-skip/t", id)
	retire("ru-skip/t")
	if _, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: "gone", Key: ownKey}); err != nil {
		t.Fatal(err)
	}
	if got, want := history(id), "1 unknown; 1 dead by the operator; 1 skip by the operator; "; got != want {
		t.Errorf("history of a delivery skipped after a retire:\n got %q\nwant %q", got, want)
	}
}
