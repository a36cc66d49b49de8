package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestPickLocksOnlyWhatItKeeps: a work transaction's pick (Go handlers)
// locks only the events it returns. While one transaction holds its pick,
// a second transaction's pick and a claim take the events the first left
// out: those past its payload budget, and those its other sources' walks
// found but the merge of sources left out. Before, the pick locked up to
// its limit of due events in every source and returned those within the
// budget and the limit: the rest stayed locked until the transaction
// ended, skipped by every other claim (a pick of 300 KiB payloads within
// 700 KiB kept two and locked all six).
func TestPickLocksOnlyWhatItKeeps(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	const kib = 1 << 10
	var ds []hookbox.Delivery
	for i := range 6 {
		d := storetest.Delivery("big", fmt.Sprint("big-", i))
		d.Payload = bytes.Repeat([]byte{byte('a' + i)}, 300*kib)
		ds = append(ds, d)
	}
	for _, src := range []string{"x", "y"} {
		for i := range 3 {
			ds = append(ds, storetest.Delivery(src, fmt.Sprint(src, "-", i)))
		}
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	pick := func(p hookbox.ClaimParams) (hookbox.WorkTx, []int64) {
		t.Helper()
		w, err := s.BeginWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Rollback() })
		p.Owner, p.Lease = "picker", time.Minute
		evs, _, err := w.Pick(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return w, ids(evs)
	}
	claim := func(sources ...string) []int64 {
		t.Helper()
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "claimer", Limit: 100, Lease: time.Minute, Sources: sources})
		if err != nil {
			t.Fatal(err)
		}
		return ids(evs)
	}

	t.Run("past the payload budget", func(t *testing.T) {
		first, kept := pick(hookbox.ClaimParams{Limit: 100, Sources: []string{"big"}, MaxPayloadBytes: 700 * kib})
		if len(kept) != 2 {
			t.Fatalf("the pick within 700 KiB kept %d events of 300 KiB, want 2", len(kept))
		}
		_, second := pick(hookbox.ClaimParams{Limit: 2, Sources: []string{"big"}})
		if len(second) != 2 || slices.ContainsFunc(second, func(id int64) bool { return slices.Contains(kept, id) }) {
			t.Errorf("a second pick, while the first holds %v: %v; want two other events", kept, second)
		}
		claimed := claim("big")
		if len(claimed) != 2 || slices.ContainsFunc(claimed, func(id int64) bool { return slices.Contains(kept, id) || slices.Contains(second, id) }) {
			t.Errorf("a claim, while picks hold %v and %v: %v; want the two events left", kept, second, claimed)
		}
		first.Rollback()
	})

	t.Run("left out by the merge of sources", func(t *testing.T) {
		first, kept := pick(hookbox.ClaimParams{Limit: 2, Sources: []string{"x", "y"}})
		if len(kept) != 2 {
			t.Fatalf("the pick of 2 over two sources kept %d events", len(kept))
		}
		claimed := claim("x", "y")
		if len(claimed) != 4 {
			t.Errorf("a claim, while a pick of 2 holds %v: %v; want the 4 other events of its sources", kept, claimed)
		}
		first.Rollback()
	})
}

// ids lists the ids of evs.
func ids(evs []hookbox.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// TestPickWhileAnotherHoldsEarlierEvents: a pick while another work
// transaction holds the first due events of its sources takes the free
// events after them, of the other sources too. The pick's first read,
// which locks nothing, sees the held rows as due: it counted them as
// what it would take, its walk of their source found nothing free in
// their place, and it took nothing, while the other source's events
// waited for the first transaction to end (the worker's txLoops ran one
// at a time).
func TestPickWhileAnotherHoldsEarlierEvents(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	ingest := func(src string, n int) []int64 {
		t.Helper()
		var ds []hookbox.Delivery
		for i := range n {
			ds = append(ds, storetest.Delivery(src, fmt.Sprint(src, "-", i)))
		}
		rs, err := s.Ingest(ctx, ds) // one transaction: due at its time
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	pick := func(sources ...string) []int64 {
		t.Helper()
		w, err := s.BeginWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Rollback() })
		evs, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: "picker", Lease: time.Minute, Limit: 3, Sources: sources})
		if err != nil {
			t.Fatal(err)
		}
		return ids(evs)
	}
	check := func(name string, got, want []int64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}

	// a's three events, then b's: while a pick holds a's, a second takes b's.
	a := ingest("a", 3)
	b := ingest("b", 3)
	check("the first pick", pick("a", "b"), a)
	check("a second pick while the first holds a's events", pick("a", "b"), b)
}
