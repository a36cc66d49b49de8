package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// released is ev's outcome for an attempt given back (hookbox.Outcome
// Released): due again at at.
func released(ev hookbox.Event, at time.Time) hookbox.Outcome {
	o := outcome(ev, hookbox.StatusPending, at)
	o.Released, o.Error = true, "cancelled by shutdown: context canceled"
	return o
}

// testReleasedAttemptIsGivenBack: an attempt given back (Outcome.Released)
// moves AttemptBase up with Attempts, so the retry budget's count stays
// where it was while attempt numbers go on, and is recorded as released.
// So it is whether the event was claimed with a lease (Finish) or picked
// in the work transaction (FinishPicked, which counts the attempt). A
// refused one changes nothing; Released with a status other than pending
// is ignored.
func testReleasedAttemptIsGivenBack(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, Delivery("rel", "1"))
	now := time.Now()

	// Claimed with a lease, then given back.
	ev := claim(t, q, now, 1, "rel")[0]
	if errs := finish(t, q, released(ev, now)); errs[0] != nil {
		t.Fatalf("Finish released: %v", errs[0])
	}
	e := status(t, q, ev.ID)
	if e.Status != hookbox.StatusPending || e.Attempts != 1 || e.AttemptBase != 1 || e.LeaseOwner != "" ||
		e.LastError != "cancelled by shutdown: context canceled" {
		t.Fatalf("after a release: %+v; want pending, attempts 1, base 1, unleased", e)
	}
	// Due at once (a second later: PostgreSQL writes the due time on its
	// own clock, by the time the finish took to reach it); the next
	// attempt is numbered 2 and is the budget's first.
	ev = claim(t, q, now.Add(time.Second), 1, "rel")[0]
	if ev.Attempts != 2 || ev.AttemptBase != 1 {
		t.Fatalf("claimed after a release: attempts %d, base %d; want 2, 1", ev.Attempts, ev.AttemptBase)
	}
	// Released means nothing with another status.
	dead := outcome(ev, hookbox.StatusDead, now)
	dead.Released, dead.Error = true, "gave up"
	if errs := finish(t, q, dead); errs[0] != nil {
		t.Fatalf("Finish dead: %v", errs[0])
	}
	if e := status(t, q, ev.ID); e.Status != hookbox.StatusDead || e.Attempts != 2 || e.AttemptBase != 1 {
		t.Fatalf("after dead (Released ignored): %+v; want dead, attempts 2, base 1", e)
	}
	as, err := q.Attempts(ctx, ev.ID)
	if err != nil || len(as) != 2 || as[0].Attempt != 1 || as[0].Outcome != hookbox.AttemptReleased ||
		as[0].Error != "cancelled by shutdown: context canceled" || as[1].Attempt != 2 || as[1].Outcome != hookbox.AttemptDead {
		t.Errorf("attempts = %+v, %v; want 1 released, 2 dead", as, err)
	}

	// A release whose lease was lost is refused and changes nothing.
	ingest(t, q, Delivery("rel-lost", "1"))
	now = time.Now()
	old := claim(t, q, now, 1, "rel-lost")[0]
	cur := claim(t, q, now.Add(2*time.Minute), 1, "rel-lost")[0]
	if errs := finish(t, q, released(old, now)); !errors.Is(errs[0], hookbox.ErrLeaseLost) {
		t.Fatalf("late release = %v, want ErrLeaseLost", errs[0])
	}
	if e := status(t, q, cur.ID); e.Status != hookbox.StatusProcessing || e.LeaseOwner != cur.LeaseOwner || e.AttemptBase != 0 {
		t.Fatalf("a refused release changed the row: %+v", e)
	}
	if as, _ := q.Attempts(ctx, cur.ID); len(as) != 1 || as[0].Outcome != hookbox.AttemptLost {
		t.Errorf("attempts after a refused release = %+v, want one lost", as)
	}

	// Picked in the work transaction: the finish counts the attempt and
	// gives it back. Released on a done outcome is ignored.
	ingest(t, q, Delivery("rel-picked", "given"), Delivery("rel-picked", "done"))
	evs, outs, errs, err := ClaimWork(q, hookbox.ClaimParams{
		Owner: fmt.Sprint("rel-", claimSeq.Add(1)), Limit: 10, Lease: time.Minute, Sources: []string{"rel-picked"},
	}, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		if ev.DeliveryID == "given" {
			return released(*ev, time.Now())
		}
		o := outcome(*ev, hookbox.StatusDone, time.Now())
		o.Released = true
		return o
	})
	if err != nil || len(evs) != 2 {
		t.Fatalf("ClaimWork = %d events, %v", len(evs), err)
	}
	for i, ev := range evs {
		if errs[i] != nil || outs[i].Status == "" {
			t.Fatalf("%s: outcome %+v, %v", ev.DeliveryID, outs[i], errs[i])
		}
		e := status(t, q, ev.ID)
		as, err := q.Attempts(ctx, ev.ID)
		if err != nil || len(as) != 1 || as[0].Attempt != 1 {
			t.Fatalf("%s: attempts %+v, %v; want one, number 1", ev.DeliveryID, as, err)
		}
		switch ev.DeliveryID {
		case "given":
			if e.Status != hookbox.StatusPending || e.Attempts != 1 || e.AttemptBase != 1 || as[0].Outcome != hookbox.AttemptReleased {
				t.Errorf("picked and given back: %+v, attempt %+v; want pending, attempts 1, base 1, released", e, as[0])
			}
		case "done":
			if e.Status != hookbox.StatusDone || e.Attempts != 1 || e.AttemptBase != 0 || as[0].Outcome != hookbox.AttemptDone {
				t.Errorf("picked and done (Released ignored): %+v, attempt %+v; want done, attempts 1, base 0", e, as[0])
			}
		}
	}
}
