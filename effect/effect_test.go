package effect_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestUncertainAfterCrash: a send whose attempt started but never finished
// (the worker died between sending and marking it sent) is listed as
// uncertain until a later attempt confirms it.
func TestUncertainAfterCrash(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.RecordSend(ctx, tx, "email", "ord_7", []byte(`{}`))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "dies", Limit: 1, Lease: time.Minute,
			Sources: []string{effect.SendSource("email")}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v %v", evs, err)
		}
		u, err := effect.Uncertain(ctx, s, "email")
		if err != nil || len(u) != 1 || u[0].DeliveryID != "ord_7" {
			t.Fatalf("uncertain = %v, %v", u, err)
		}
		now := time.Now()
		errs, err := s.Finish(ctx, []hookbox.Outcome{{ID: evs[0].ID, Owner: "dies", Attempt: 1,
			Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		if u, _ := effect.Uncertain(ctx, s, "email"); len(u) != 0 {
			t.Fatalf("a confirmed send is still uncertain: %v", u)
		}
	})
}
