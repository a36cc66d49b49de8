package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// notRunError is the error of the outcomes testNotRunTakesItsCountBack
// ends events with, as the worker's for an event claimed past its last
// attempt.
const notRunError = "the last attempt's worker stopped without an outcome (the process died?); not run again"

// notRun is ev's outcome for an event ended dead without running the
// attempt its claim counted (hookbox.Outcome.NotRun).
func notRun(ev hookbox.Event, at time.Time) hookbox.Outcome {
	o := outcome(ev, hookbox.StatusDead, at)
	o.NotRun, o.Error = true, notRunError
	return o
}

// testNotRunTakesItsCountBack: an event ended dead without running
// (Outcome.NotRun) keeps the attempt count it had before the claim that
// ended it, whichever way it reached its worker: claimed with a lease
// (Queue.Finish), held in a work transaction (WorkTx.Finish), or picked
// by one (WorkTx.FinishPicked, which counts no attempt for it). Its end
// is recorded as a not_run row numbered with the last attempt made,
// listed after that attempt, an unknown one included. A refused one
// changes nothing and its lost row keeps the claimed number; NotRun with
// another status is ignored.
func testNotRunTakesItsCountBack(t *testing.T, q QueueStore) {
	ctx := context.Background()
	attempts := func(id int64) string {
		t.Helper()
		as, err := q.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, a := range as {
			s += fmt.Sprintf("%d %s; ", a.Attempt, a.Outcome)
			if a.Outcome == hookbox.AttemptNotRun && a.Error != notRunError {
				t.Errorf("event %d: not_run row's error %q, want %q", id, a.Error, notRunError)
			}
		}
		return s
	}
	deadWith := func(what string, id int64, n int, want string) {
		t.Helper()
		e := status(t, q, id)
		if e.Status != hookbox.StatusDead || e.Attempts != n || e.AttemptBase != 0 || e.LeaseOwner != "" || e.LastError != notRunError {
			t.Errorf("%s: %s, attempts %d, base %d, owner %q, error %q; want dead, attempts %d, base 0, unleased, the reason",
				what, e.Status, e.Attempts, e.AttemptBase, e.LeaseOwner, e.LastError, n)
		}
		if got := attempts(id); got != want {
			t.Errorf("%s: attempts %q, want %q", what, got, want)
		}
	}

	// Claimed with a lease, whose worker died (no outcome); claimed again
	// once the lease ended, and ended without running.
	ingest(t, q, Delivery("notrun", "leased"))
	now := time.Now()
	first := claim(t, q, now, 1, "notrun")[0]
	ev := claim(t, q, now.Add(2*time.Minute), 1, "notrun")[0]
	if ev.ID != first.ID || ev.Attempts != 2 {
		t.Fatalf("claimed again: event %d, attempts %d; want %d, 2", ev.ID, ev.Attempts, first.ID)
	}
	if errs := finish(t, q, notRun(ev, now)); errs[0] != nil {
		t.Fatalf("Finish not run: %v", errs[0])
	}
	deadWith("claimed", ev.ID, 1, "1 unknown; 1 not_run; ")
	if evs := claim(t, q, now.Add(time.Hour), 1, "notrun"); len(evs) != 0 {
		t.Fatal("an event ended without running was claimed")
	}

	// A late one (the lease moved on) is refused; the row is the newer
	// claim's, and the lost row bears the number its claim gave.
	ingest(t, q, Delivery("notrun-lost", "1"))
	now = time.Now()
	old := claim(t, q, now, 1, "notrun-lost")[0]
	cur := claim(t, q, now.Add(2*time.Minute), 1, "notrun-lost")[0]
	if errs := finish(t, q, notRun(old, now)); !errors.Is(errs[0], hookbox.ErrLeaseLost) {
		t.Fatalf("late not-run finish = %v, want ErrLeaseLost", errs[0])
	}
	if e := status(t, q, cur.ID); e.Status != hookbox.StatusProcessing || e.Attempts != 2 || e.LeaseOwner != cur.LeaseOwner {
		t.Fatalf("a refused not-run finish changed the row: %+v", e)
	}
	if got, want := attempts(cur.ID), "1 lost; "; got != want {
		t.Errorf("after a refused not-run finish: attempts %q, want %q", got, want)
	}

	// Held in a work transaction (the rescued event of a Go handler's
	// claim, run alone under its counted lease).
	ingest(t, q, Delivery("notrun-held", "1"))
	now = time.Now()
	claim(t, q, now, 1, "notrun-held")
	held := claim(t, q, now.Add(2*time.Minute), 1, "notrun-held")
	outs, errs, err := Work(q, held, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		return notRun(*ev, time.Now())
	})
	if err != nil || errs[0] != nil || outs[0].Status != hookbox.StatusDead {
		t.Fatalf("Work = %+v, %v, %v", outs, errs, err)
	}
	deadWith("held", held[0].ID, 1, "1 unknown; 1 not_run; ")

	// Picked in a work transaction, after a retry: the pick counts no
	// attempt for it. NotRun with another status is ignored.
	ingest(t, q, Delivery("notrun-picked", "dead"), Delivery("notrun-picked", "retry"))
	now = time.Now()
	for _, ev := range claim(t, q, now, 2, "notrun-picked") {
		o := outcome(ev, hookbox.StatusPending, now)
		o.Error = "503"
		finish(t, q, o)
	}
	evs, outs, errs, err := ClaimWork(q, hookbox.ClaimParams{
		Owner: fmt.Sprint("notrun-", claimSeq.Add(1)), Limit: 10, Lease: time.Minute, Sources: []string{"notrun-picked"},
	}, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		o := notRun(*ev, time.Now())
		if ev.DeliveryID == "retry" {
			o.Status, o.RetryAt = hookbox.StatusPending, time.Now().Add(time.Hour)
		}
		return o
	})
	if err != nil || len(evs) != 2 {
		t.Fatalf("ClaimWork = %d events, %v", len(evs), err)
	}
	for i, ev := range evs {
		if errs[i] != nil || outs[i].Status == "" {
			t.Fatalf("%s: outcome %+v, %v", ev.DeliveryID, outs[i], errs[i])
		}
		switch ev.DeliveryID {
		case "dead":
			deadWith("picked", ev.ID, 1, "1 retry; 1 not_run; ")
		case "retry":
			e := status(t, q, ev.ID)
			if got, want := attempts(ev.ID), "1 retry; 2 retry; "; e.Status != hookbox.StatusPending || e.Attempts != 2 || got != want {
				t.Errorf("picked, retried (NotRun ignored): %s, attempts %d, rows %q; want pending, 2, %q", e.Status, e.Attempts, got, want)
			}
		}
	}
}
