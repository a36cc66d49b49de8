package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPickLeavesPausedUnlocked: a Go handlers' pick over a paused queue
// and others locks none of the paused queue's rows: rows it locked and
// left out stay locked for the whole work transaction (its handlers),
// so that once the queue is resumed no claim could take them until it
// ended.
func TestPickLeavesPausedUnlocked(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ds []hookbox.Delivery
	for i := range 3 {
		ds = append(ds, hookbox.Delivery{Source: "pl-held", DeliveryID: fmt.Sprint("h", i), Payload: []byte(`{}`), ReceivedAt: time.Now()})
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "pl-free", DeliveryID: "f1", Payload: []byte(`{}`), ReceivedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseTarget(ctx, "pl-held", "maintenance"); err != nil {
		t.Fatal(err)
	}
	w, err := s.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	if _, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: "pick", Limit: 10, Lease: time.Minute,
		Sources: []string{"pl-held", "pl-free"}}); err != nil {
		t.Fatal(err)
	}
	// The handlers run; meanwhile the operator resumes the queue.
	if _, err := s.ResumeTarget(ctx, "pl-held"); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "after-resume", Limit: 10, Lease: time.Minute, Sources: []string{"pl-held"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("claim of pl-held once resumed, while a pick that left it out is open = %d events, want 3 (the pick locked the paused queue's rows)", len(evs))
	}
}
