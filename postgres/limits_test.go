package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestClaimLimitPerSourceSkipsLocked: a claim with a limit per source
// (hookbox.ClaimParams.Limits) passes over rows another transaction holds
// (here a work transaction's pick), without waiting for it and without
// counting them toward the source's limit: it takes the next of that
// source, and the first of the other.
func TestClaimLimitPerSourceSkipsLocked(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	var ds []hookbox.Delivery
	for _, src := range []string{"sl-a", "sl-b"} {
		for _, id := range []string{"0", "1"} {
			ds = append(ds, storetest.Delivery(src, id))
		}
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	w, err := s.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	held, _, err := w.Pick(ctx, hookbox.ClaimParams{Limit: 1, Sources: []string{"sl-a"}})
	if err != nil || len(held) != 1 || held[0].DeliveryID != "0" {
		t.Fatalf("pick = %v, %v; want sl-a's first", held, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	evs, err := s.Claim(cctx, hookbox.ClaimParams{Owner: "skip-locked", Limit: 10, Lease: time.Minute,
		Sources: []string{"sl-a", "sl-b"}, Limits: []int{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Source+":"+e.DeliveryID)
	}
	slices.Sort(got)
	if want := []string{"sl-a:1", "sl-b:0"}; !slices.Equal(got, want) {
		t.Fatalf("claim beside a pick holding sl-a:0 = %v, want %v", got, want)
	}
}
