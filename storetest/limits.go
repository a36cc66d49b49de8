package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testClaimLimitPerSource: a claim with a limit per source
// (hookbox.ClaimParams.Limits) takes at most each source's limit of it
// (none of a source whose limit is 0), and at most Limit in all, the
// first due overall; each source's events are its first due, by next
// attempt time before id; events the claimer runs (RunningIDs) are passed
// over and count toward no limit; the payload budget bounds the claim as
// a whole, in id order, its first event kept whatever its size; a claim
// over more sources than one SQLite statement walks keeps each limit.
// Limits that do not match the sources, and a pick with limits, are
// refused.
func testClaimLimitPerSource(t *testing.T, q QueueStore) {
	ctx := context.Background()
	take := func(what string, p hookbox.ClaimParams) []string {
		t.Helper()
		p.Owner, p.Lease = fmt.Sprint("limits-", claimSeq.Add(1)), time.Minute
		evs, err := q.Claim(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got []string
		for _, e := range evs {
			if e.Status != hookbox.StatusProcessing || e.LeaseOwner != p.Owner || e.Attempts < 1 {
				t.Errorf("%s: event %d claimed as %s, owner %q, attempt %d", what, e.ID, e.Status, e.LeaseOwner, e.Attempts)
			}
			got = append(got, e.Source+":"+e.DeliveryID)
		}
		slices.Sort(got)
		return got
	}
	want := func(what string, got []string, w ...string) {
		t.Helper()
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s: claimed %v, want %v", what, got, w)
		}
	}

	// Each source up to its own limit; none of one whose limit is 0.
	var ds []hookbox.Delivery
	for _, src := range []string{"lim-a", "lim-b", "lim-c"} {
		for i := range 4 {
			ds = append(ds, Delivery(src, fmt.Sprint(i)))
		}
	}
	ingest(t, q, ds...)
	abc := []string{"lim-a", "lim-b", "lim-c"}
	first := take("limits 2, 0, 3", hookbox.ClaimParams{Limit: 10, Sources: abc, Limits: []int{2, 0, 3}})
	want("limits 2, 0, 3", first, "lim-a:0", "lim-a:1", "lim-c:0", "lim-c:1", "lim-c:2")

	// Limit bounds them all: the first due across the sources.
	want("limits 5 each, 3 in all", take("limits 5 each, 3 in all", hookbox.ClaimParams{Limit: 3, Sources: abc, Limits: []int{5, 5, 5}}),
		"lim-a:2", "lim-a:3", "lim-b:0")

	// A source's first due, not its lowest ids: c1 and c2 come back as
	// retries, c2 due before c1, both before c3 (due since it was stored).
	evs, err := q.Events(ctx, hookbox.Filter{Source: "lim-c", Status: hookbox.StatusProcessing})
	if err != nil || len(evs) != 3 {
		t.Fatalf("lim-c's claimed events: %v, %v", evs, err)
	}
	now := time.Now()
	for _, e := range evs {
		switch e.DeliveryID {
		case "0":
			finish(t, q, outcome(e, hookbox.StatusDone, now))
		case "1":
			finish(t, q, outcome(e, hookbox.StatusPending, now.Add(-time.Minute)))
		case "2":
			finish(t, q, outcome(e, hookbox.StatusPending, now.Add(-time.Hour)))
		}
	}
	bc := []string{"lim-b", "lim-c"}
	want("limits 1, 1 after the retries", take("limits 1, 1", hookbox.ClaimParams{Limit: 10, Sources: bc, Limits: []int{1, 1}}),
		"lim-b:1", "lim-c:2")
	want("limits 0, 1", take("limits 0, 1", hookbox.ClaimParams{Limit: 10, Sources: bc, Limits: []int{0, 1}}), "lim-c:1")
	want("limits 0, 5", take("limits 0, 5", hookbox.ClaimParams{Limit: 10, Sources: bc, Limits: []int{0, 5}}), "lim-c:3")

	// Events the claimer runs, their leases over, are passed over and
	// count toward no limit.
	ds = ds[:0]
	for _, src := range []string{"run-a", "run-b"} {
		for i := range 3 {
			ds = append(ds, Delivery(src, fmt.Sprint(i)))
		}
	}
	rs := ingest(t, q, ds...)
	ab := []string{"run-a", "run-b"}
	want("running: first claim", take("first", hookbox.ClaimParams{Limit: 10, Sources: ab, Limits: []int{2, 2}}),
		"run-a:0", "run-a:1", "run-b:0", "run-b:1")
	want("running: second claim", take("second", hookbox.ClaimParams{Limit: 10, Sources: ab, Limits: []int{1, 1}}),
		"run-a:2", "run-b:2")
	later := time.Now().Add(2 * time.Minute) // every lease of a minute is over
	want("limits 1, 1 with a0, a1 and b0 running", take("running", hookbox.ClaimParams{Limit: 10, Sources: ab, Limits: []int{1, 1},
		Now: later, RunningIDs: []int64{rs[0].ID, rs[1].ID, rs[3].ID}}),
		"run-a:2", "run-b:1")

	// The payload budget bounds the claim as a whole, in id order.
	const kib = 1 << 10
	ds = ds[:0]
	for i := range 3 {
		for _, src := range []string{"bud-a", "bud-b"} {
			d := Delivery(src, fmt.Sprint(i))
			d.Payload = sizedPayload(i, 300*kib)
			ds = append(ds, d)
		}
	}
	ingest(t, q, ds...)
	budAB := []string{"bud-a", "bud-b"}
	want("700 KiB", take("700 KiB", hookbox.ClaimParams{Limit: 10, Sources: budAB, Limits: []int{3, 3}, MaxPayloadBytes: 700 * kib}),
		"bud-a:0", "bud-b:0")
	want("100 KiB", take("100 KiB", hookbox.ClaimParams{Limit: 10, Sources: budAB, Limits: []int{3, 3}, MaxPayloadBytes: 100 * kib}),
		"bud-a:1")

	// More sources than one SQLite statement walks (maxUnion): each keeps
	// its limit.
	ds = ds[:0]
	var many []string
	for i := range 450 {
		src := fmt.Sprint("lim-many-", i)
		many = append(many, src)
		ds = append(ds, Delivery(src, "0"), Delivery(src, "1"))
	}
	ingest(t, q, ds...)
	ones := make([]int, len(many))
	for i := range ones {
		ones[i] = 1
	}
	got := take("450 sources, 1 each", hookbox.ClaimParams{Limit: 1000, Sources: many, Limits: ones})
	if len(got) != 450 {
		t.Errorf("450 sources, limit 1 each: claimed %d events, want 450", len(got))
	}
	seen := map[string]bool{}
	for _, g := range got {
		src := g[:len(g)-2]
		if seen[src] {
			t.Errorf("450 sources, limit 1 each: claimed two events of %s", src)
		}
		seen[src] = true
	}

	// Refused: limits that do not match the sources, and a pick with
	// limits.
	if _, err := q.Claim(ctx, hookbox.ClaimParams{Owner: "x", Limit: 5, Lease: time.Minute, Sources: ab, Limits: []int{1}}); err == nil {
		t.Error("a claim with 1 limit for 2 sources was not refused")
	}
	w, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	if _, _, err := w.Pick(ctx, hookbox.ClaimParams{Limit: 5, Sources: ab, Limits: []int{1, 1}}); err == nil {
		t.Error("a pick with limits per source was not refused")
	}
}
