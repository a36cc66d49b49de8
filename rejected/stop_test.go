package rejected_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckStoppedPartWayCountsWhatIsStored: a re-check of 150 deliveries
// that now pass stores them a page (100) at a time; when marking one of
// the second page admitted fails (a trigger refuses it), its page's events
// are stored all the same, and the result beside the error counts every
// stored event (Admitted, each with its event), not only those marked
// before the failure. A re-check run again stores nothing twice: it finds
// the unmarked ones already stored and marks them. Before, the result
// left out the deliveries of the page after the one whose mark failed,
// though their events were stored and would be worked.
func TestRecheckStoppedPartWayCountsWhatIsStored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-recheck-secret-0123"}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		kept := storetest.SignedRejections(t, st, cfg, "gh", 150)
		refused := kept[125].ID // the 26th of the second page
		drop := dbtest.Refuse(t, dbURL, "UPDATE", "rejected_deliveries", refused)
		sources := map[string]rejected.Source{"gh": {Verifier: v}}
		res, err := rejected.Recheck(ctx, st, sources, rejected.RecheckParams{})
		drop()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint("admit rejection ", refused)) {
			t.Fatalf("re-check with a mark refused: %v, want the error naming rejection %d", err, refused)
		}
		evs, err := st.Events(ctx, hookbox.Filter{Source: "gh", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		stored := map[int64]bool{}
		for _, e := range evs {
			stored[e.ID] = true
		}
		counted := 0
		for _, a := range res.Admitted {
			if stored[a.EventID] && !a.Duplicate {
				counted++
			}
		}
		if len(evs) != 150 || len(res.Admitted) != len(evs) || counted != len(evs) {
			t.Fatalf("%d events stored; the result admits %d, %d of them as a stored event; want every stored event counted",
				len(evs), len(res.Admitted), counted)
		}
		again, err := rejected.Recheck(ctx, st, sources, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range again.Admitted {
			if !a.Duplicate || !stored[a.EventID] {
				t.Errorf("run again, rejection %d admitted as event %d, duplicate %v: want only those left unmarked, as duplicates of their events",
					a.RejectionID, a.EventID, a.Duplicate)
			}
		}
		if evs, _ := st.Events(ctx, hookbox.Filter{Source: "gh", Limit: 1000}); len(evs) != 150 || len(again.Admitted) != 25 {
			t.Errorf("run again: %d admitted, %d events stored; want the 25 unmarked, and 150", len(again.Admitted), len(evs))
		}
	})
}
