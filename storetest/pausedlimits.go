package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testClaimPausedLeavesRoomForOthers: the events of a paused queue asked
// for alongside others (a pool whose pauses are stale or unread) take
// none of a claim's limit, nor of its payload budget, nor of a pick's:
// the other queues' due events are claimed as if the paused one were
// not asked for.
func testClaimPausedLeavesRoomForOthers(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ids := func(evs []hookbox.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.Source+":"+e.DeliveryID)
		}
		return out
	}
	// For each case, a paused queue with three events due first, then a
	// free queue with one.
	setup := func(name string, size int) (held, free string) {
		n := strings.ReplaceAll(name, " ", "-")
		held, free = "plr-held-"+n, "plr-free-"+n
		var ds []hookbox.Delivery
		for i := range 3 {
			d := Delivery(held, fmt.Sprint("h", i))
			d.Payload = []byte(`{"x":"` + strings.Repeat("a", size) + `"}`)
			ds = append(ds, d)
		}
		ingest(t, q, ds...)
		ingest(t, q, Delivery(free, "f1"))
		if err := q.PauseTarget(ctx, held, "maintenance"); err != nil {
			t.Fatal(err)
		}
		return held, free
	}
	cases := []struct {
		name string
		p    func(held, free string) hookbox.ClaimParams
		size int
	}{
		{"limit", func(h, f string) hookbox.ClaimParams {
			return hookbox.ClaimParams{Sources: []string{h, f}, Limit: 2}
		}, 10},
		{"limits per source", func(h, f string) hookbox.ClaimParams {
			return hookbox.ClaimParams{Sources: []string{h, f}, Limits: []int{5, 5}, Limit: 2}
		}, 10},
		{"budget", func(h, f string) hookbox.ClaimParams {
			return hookbox.ClaimParams{Sources: []string{h, f}, Limit: 10, MaxPayloadBytes: 500}
		}, 1000},
	}
	for _, c := range cases {
		held, free := setup(c.name, c.size)
		p := c.p(held, free)
		p.Owner, p.Lease = fmt.Sprint("plr-", claimSeq.Add(1)), time.Minute
		evs, err := q.Claim(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := ids(evs), []string{free + ":f1"}; !slices.Equal(got, want) {
			t.Errorf("claim (%s) of %s (paused, 3 due first) and %s = %v, want %v", c.name, held, free, got, want)
		}
	}
	for _, c := range []struct {
		name   string
		limit  int
		budget int64
		size   int
	}{{"pick limit", 2, 0, 10}, {"pick budget", 10, 500, 1000}} {
		held, free := setup(c.name, c.size)
		w, err := q.BeginWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("plr-", claimSeq.Add(1)), Limit: c.limit,
			Lease: time.Minute, Sources: []string{held, free}, MaxPayloadBytes: c.budget})
		w.Rollback()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := ids(evs), []string{free + ":f1"}; !slices.Equal(got, want) {
			t.Errorf("%s of %s (paused, 3 due first) and %s = %v, want %v", c.name, held, free, got, want)
		}
	}
}
