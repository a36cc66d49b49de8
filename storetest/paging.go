package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// pagingTests are the listing's paging under change: walking every page
// of a listing (hookbox.Filter.BeforeID set to the last id of the page
// before) while events arrive, are worked, purged and replayed between
// the pages.
var pagingTests = map[string]func(*testing.T, FullStore){
	"ListingPagesWhileRowsChange":         testListingPagesWhileRowsChange,
	"ListingByStatusPagesWhileRowsMove":   testListingByStatusPagesWhileRowsMove,
	"ListingBySourcePagesWhileRowsChange": testListingBySourcePagesWhileRowsChange,
}

// pagingWorld is a store set up for a paged walk and changed between its
// pages: events of source pw the "worker" claims and finishes, dead ones
// of pd that are replayed, pending ones of pi that nothing touches, done
// ones of po finished long ago that a purge deletes slice by slice, and
// new ones of pn that arrive. Every event is received at the same
// instant, so that the time ties and only the ids can order them.
type pagingWorld struct {
	t       *testing.T
	s       FullStore
	at      time.Time // every event's receipt time
	old     time.Time // when the po events finished
	worked  []int64   // pw: pending, finished done page by page
	dead    []int64   // pd: dead, replayed page by page
	idle    []int64   // pi: pending throughout
	purged  []int64   // po: done long ago, purged page by page
	step    int
	arrived int
}

// pagingChunks is how many chunks of each source's events the world
// interleaves, so that every page holds events of several sources.
const pagingChunks = 10

func newPagingWorld(t *testing.T, s FullStore) *pagingWorld {
	w := &pagingWorld{t: t, s: s, at: time.Now().Add(-time.Minute).Truncate(time.Millisecond),
		old: time.Now().Add(-48 * time.Hour)}
	d := func(source string, i, j int) hookbox.Delivery {
		dv := Delivery(source, fmt.Sprint(source, "-", i, "-", j))
		dv.ReceivedAt = w.at
		return dv
	}
	for i := range pagingChunks {
		var po, pd, pw, pi []hookbox.Delivery
		for j := range 3 {
			po, pw = append(po, d("po", i, j)), append(pw, d("pw", i, j))
		}
		for j := range 2 {
			pd, pi = append(pd, d("pd", i, j)), append(pi, d("pi", i, j))
		}
		// Each chunk of po finishes an hour before the next one, so
		// that each purge below deletes one chunk.
		w.purged = append(w.purged, Seed(t, s, hookbox.StatusDone, w.old.Add(-time.Duration(pagingChunks-i)*time.Hour), "", po...)...)
		w.dead = append(w.dead, Seed(t, s, hookbox.StatusDead, time.Now(), "failed for the test", pd...)...)
		w.worked = append(w.worked, Seed(t, s, hookbox.StatusPending, time.Time{}, "", pw...)...)
		w.idle = append(w.idle, Seed(t, s, hookbox.StatusPending, time.Time{}, "", pi...)...)
	}
	return w
}

// change is what happens between two pages: three new events arrive,
// three pw events are claimed and finished, one chunk of po (the oldest
// left) is purged, and two pd events are replayed.
func (w *pagingWorld) change() {
	t, ctx := w.t, context.Background()
	w.step++
	var ds []hookbox.Delivery
	for range 3 {
		w.arrived++
		dv := Delivery("pn", fmt.Sprint("pn-", w.arrived))
		dv.ReceivedAt = w.at
		ds = append(ds, dv)
	}
	ingest(t, w.s, ds...)
	evs := claim(t, w.s, time.Now(), 3, "pw")
	outs := make([]hookbox.Outcome, len(evs))
	for i, e := range evs {
		outs[i] = outcome(e, hookbox.StatusDone, time.Now())
	}
	if len(outs) > 0 {
		for i, err := range finish(t, w.s, outs...) {
			if err != nil {
				t.Fatalf("finish %d: %v", evs[i].ID, err)
			}
		}
	}
	if w.step <= pagingChunks {
		cut := w.old.Add(-time.Duration(pagingChunks-w.step)*time.Hour + time.Minute)
		if _, err := w.s.Purge(ctx, hookbox.PurgeParams{Before: cut}); err != nil {
			t.Fatalf("purge: %v", err)
		}
	}
	if i := 2 * (w.step - 1); i < len(w.dead) {
		replay(t, w.s, hookbox.ReplayParams{IDs: w.dead[i:min(i+2, len(w.dead))]})
	}
}

// walk lists every page of f, limit events a page, changing the world
// between pages, and returns the ids in the order listed. It fails the
// test when a page is not newest first or starts at or above the cursor.
func (w *pagingWorld) walk(f hookbox.Filter, limit int) []int64 {
	t := w.t
	f.Limit = limit
	var ids []int64
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("walk %+v: no last page after %d pages", f, pages)
		}
		evs, err := w.s.Events(context.Background(), f)
		if err != nil {
			t.Fatalf("Events(%+v): %v", f, err)
		}
		for i, e := range evs {
			if f.BeforeID > 0 && e.ID >= f.BeforeID {
				t.Fatalf("walk %+v: page lists id %d, not below the cursor", f, e.ID)
			}
			if i > 0 && e.ID >= evs[i-1].ID {
				t.Fatalf("walk %+v: page is not newest first: %d after %d", f, e.ID, evs[i-1].ID)
			}
			ids = append(ids, e.ID)
		}
		if len(evs) < limit {
			return ids
		}
		f.BeforeID = evs[len(evs)-1].ID
		w.change()
	}
}

// seenOnce fails the test when an id is listed twice in got, or an id of
// want is not listed once.
func seenOnce(t *testing.T, what string, got, want []int64) {
	t.Helper()
	n := map[int64]int{}
	for _, id := range got {
		n[id]++
		if n[id] == 2 {
			t.Errorf("%s: id %d listed twice", what, id)
		}
	}
	for _, id := range want {
		if n[id] != 1 {
			t.Errorf("%s: id %d, there throughout, listed %d times", what, id, n[id])
		}
	}
}

// testListingPagesWhileRowsChange: a walk of every page of the listing
// (bounded to the one receipt time every event has), with rows arriving,
// finishing, being purged and replayed between its pages, lists each row
// there throughout exactly once, and no row twice, though every receipt
// time ties.
func testListingPagesWhileRowsChange(t *testing.T, s FullStore) {
	w := newPagingWorld(t, s)
	got := w.walk(hookbox.Filter{Since: w.at, Until: w.at.Add(time.Millisecond)}, 7)
	seenOnce(t, "every event", got, slices.Concat(w.worked, w.dead, w.idle))
	w.walkedEnough()
}

// testListingByStatusPagesWhileRowsMove: walks by a status the changes
// move rows out of (pending: finished; dead: replayed) and into (pending:
// replayed, arrived) list each row in the status throughout exactly once,
// and none twice.
func testListingByStatusPagesWhileRowsMove(t *testing.T, s FullStore) {
	w := newPagingWorld(t, s)
	got := w.walk(hookbox.Filter{Status: hookbox.StatusPending}, 5)
	seenOnce(t, "pending events", got, w.idle)
	w.walkedEnough()
	before := w.step
	got = w.walk(hookbox.Filter{Status: hookbox.StatusDead}, 2)
	// The replays go up the dead ids from the lowest while the walk goes
	// down: the ones left dead at its end were dead throughout.
	seenOnce(t, "dead events", got, w.dead[min(2*w.step, len(w.dead)):])
	if w.step == before {
		t.Fatal("the walk of the dead events saw no change")
	}
}

// testListingBySourcePagesWhileRowsChange: a walk by source, while that
// source's events are finished between its pages, lists each of them
// exactly once.
func testListingBySourcePagesWhileRowsChange(t *testing.T, s FullStore) {
	w := newPagingWorld(t, s)
	got := w.walk(hookbox.Filter{Source: "pw"}, 4)
	seenOnce(t, "pw events", got, w.worked)
	w.walkedEnough()
}

// walkedEnough fails the test when the walks so far took too few pages
// for every kind of change to have happened between two of them.
func (w *pagingWorld) walkedEnough() {
	w.t.Helper()
	if w.step < 3 {
		w.t.Fatalf("the walk took %d pages: too few to see the changes", w.step+1)
	}
}
