package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/queue"
)

// QueueStore is a store that is also a queue, as both implementations are.
type QueueStore interface {
	hookbox.Store
	hookbox.Queue
}

// QueueOpener returns a fresh, empty store for one test. The suite closes it.
type QueueOpener func(t *testing.T) QueueStore

// RunQueue runs the queue half of the suite.
func RunQueue(t *testing.T, open QueueOpener) {
	tests := map[string]func(*testing.T, QueueStore){
		"ClaimAndFinishDone":         testClaimAndFinishDone,
		"MarksChargeDeadPool":        testMarksChargeDeadPool,
		"ClaimWorkRescuesOneAlone":   testClaimWorkRescuesOneAlone,
		"ClaimOnlyRoutedSources":     testClaimOnlyRoutedSources,
		"ExpiredLeaseIsReclaimed":    testExpiredLeaseIsReclaimed,
		"LateFinishIsRefused":        testLateFinishIsRefused,
		"ExtendLeaseKeepsClaim":      testExtendLeaseKeepsClaim,
		"RetryWaitsThenDead":         testRetryWaitsThenDead,
		"WorkCommitsWithDone":        testWorkCommitsWithDone,
		"WorkRollsBackOnFailure":     testWorkRollsBackOnFailure,
		"WorkSkipsLostLease":         testWorkSkipsLostLease,
		"StrictOneInFlightInIDOrder": testStrictOneInFlight,
		"ClaimWorkRunsAndLeavesRest": testClaimWork,
		"WorkerRecords":              testWorkerRecords,
		"FinishStoresAnyErrorText":   testFinishAnyErrorText,
		"FanOut":                     testFanOut,
		"StoredListingPages":         testStoredListingPages,
		"FanOutPurgedAsDead":         testFanOutPurgedAsDead,
		"ClaimByKey":                 testClaimByKey,
		"ClaimByKeyWhileOneRuns":     testClaimByKeyWhileOneRuns,
		"ClaimByKeyWalksOn":          testClaimByKeyWalksOn,
		"ClaimByKeyRunning":          testClaimByKeyRunning,
		"FillOrderKeys":              testFillOrderKeys,
		"FillOrderKeysRounds":        testFillOrderKeysRounds,
		"ClaimSkipsRunning":          testClaimSkipsRunning,
		"FanOutPayloadKept":          testFanOutPayloadKept,
		"PauseTargets":               testPauseTargets,
		"ClaimSkipsPaused":           testClaimSkipsPaused,
		"ClaimPausedLeavesRoom":      testClaimPausedLeavesRoomForOthers,
		"ReleasedAttemptIsGivenBack": testReleasedAttemptIsGivenBack,
		"NotRunTakesItsCountBack":    testNotRunTakesItsCountBack,
		"DueQueues":                  testDueQueues,
		"ClaimManySources":           testClaimManySources,
		"ClaimReturnsEveryPayload":   testClaimReturnsEveryPayload,
		"ClaimWithinPayloadBudget":   testClaimWithinPayloadBudget,
		"ClaimLimitPerSource":        testClaimLimitPerSource,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

var claimSeq atomic.Int64

func claim(t *testing.T, q QueueStore, now time.Time, limit int, sources ...string) []hookbox.Event {
	t.Helper()
	evs, err := q.Claim(context.Background(), hookbox.ClaimParams{
		Owner:   fmt.Sprint("test-", claimSeq.Add(1)),
		Limit:   limit,
		Lease:   time.Minute,
		Sources: sources,
		Now:     now,
	})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return evs
}

func outcome(ev hookbox.Event, st hookbox.Status, at time.Time) hookbox.Outcome {
	return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: st,
		RetryAt: at, StartedAt: at, FinishedAt: at}
}

func finish(t *testing.T, q QueueStore, outs ...hookbox.Outcome) []error {
	t.Helper()
	errs, err := q.Finish(context.Background(), outs)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return errs
}

func status(t *testing.T, q QueueStore, id int64) hookbox.Event {
	t.Helper()
	e, err := q.Event(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testClaimAndFinishDone(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("q", "1"), Delivery("q", "2"), Delivery("q", "3"))
	now := time.Now()
	evs := claim(t, q, now, 2, "q")
	if len(evs) != 2 {
		t.Fatalf("claimed %d, want 2", len(evs))
	}
	for _, e := range evs {
		if e.Status != hookbox.StatusProcessing || e.Attempts != 1 || e.LeaseOwner == "" || len(e.Payload) == 0 {
			t.Errorf("claimed event = %+v", e)
		}
	}
	if errs := finish(t, q, outcome(evs[0], hookbox.StatusDone, now), outcome(evs[1], hookbox.StatusDone, now)); errs[0] != nil || errs[1] != nil {
		t.Fatalf("Finish errors %v", errs)
	}
	if e := status(t, q, evs[0].ID); e.Status != hookbox.StatusDone || e.LeaseOwner != "" {
		t.Errorf("after done: %+v", e)
	}
	rest := claim(t, q, now, 10, "q")
	if len(rest) != 1 || rest[0].DeliveryID != "3" {
		t.Fatalf("second claim = %v, want only event 3", rest)
	}
	if more := claim(t, q, now, 10, "q"); len(more) != 0 {
		t.Fatalf("a leased event was claimed again: %v", more)
	}
	as, err := q.Attempts(context.Background(), evs[0].ID)
	if err != nil || len(as) != 1 || as[0].Outcome != hookbox.AttemptDone || as[0].Attempt != 1 {
		t.Errorf("attempts = %+v, %v", as, err)
	}
}

func testClaimOnlyRoutedSources(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("a", "1"), Delivery("b", "1"))
	if evs := claim(t, q, time.Now(), 10, "b", "c"); len(evs) != 1 || evs[0].Source != "b" {
		t.Fatalf("claim for b,c = %v", evs)
	}
	if evs := claim(t, q, time.Now(), 10); len(evs) != 0 {
		t.Fatalf("claim with no sources = %v", evs)
	}
}

// testExpiredLeaseIsReclaimed simulates a crashed worker: nobody finishes,
// the lease runs out, and the next claim takes the event with a new attempt.
func testExpiredLeaseIsReclaimed(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("crash", "1"))
	now := time.Now()
	first := claim(t, q, now, 1, "crash")
	if len(first) != 1 {
		t.Fatal("nothing claimed")
	}
	if again := claim(t, q, now.Add(30*time.Second), 1, "crash"); len(again) != 0 {
		t.Fatal("claimed while the lease was live")
	}
	second := claim(t, q, now.Add(2*time.Minute), 1, "crash")
	if len(second) != 1 || second[0].Attempts != 2 || second[0].LeaseOwner == first[0].LeaseOwner {
		t.Fatalf("after expiry: %+v", second)
	}
}

// testLateFinishIsRefused is River #1302: a worker whose lease was taken over
// must not overwrite the newer state.
func testLateFinishIsRefused(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("late", "1"))
	now := time.Now()
	old := claim(t, q, now, 1, "late")[0]
	cur := claim(t, q, now.Add(2*time.Minute), 1, "late")[0]
	errs := finish(t, q, outcome(old, hookbox.StatusDone, now))
	if !errors.Is(errs[0], hookbox.ErrLeaseLost) {
		t.Fatalf("late finish error = %v, want ErrLeaseLost", errs[0])
	}
	if e := status(t, q, cur.ID); e.Status != hookbox.StatusProcessing || e.LeaseOwner != cur.LeaseOwner {
		t.Fatalf("late finish changed the row: %+v", e)
	}
	if errs := finish(t, q, outcome(cur, hookbox.StatusDead, now)); errs[0] != nil {
		t.Fatalf("current owner's finish: %v", errs[0])
	}
	// A finish after the event is already finished is refused too.
	if errs := finish(t, q, outcome(cur, hookbox.StatusDone, now)); !errors.Is(errs[0], hookbox.ErrLeaseLost) {
		t.Fatalf("second finish = %v, want ErrLeaseLost", errs[0])
	}
	if e := status(t, q, cur.ID); e.Status != hookbox.StatusDead {
		t.Fatalf("status = %s, want dead", e.Status)
	}
	as, _ := q.Attempts(context.Background(), cur.ID)
	if len(as) != 3 || as[0].Outcome != hookbox.AttemptLost || as[1].Outcome != hookbox.AttemptDead {
		t.Errorf("attempts = %+v", as)
	}
}

func testExtendLeaseKeepsClaim(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("ext", "1"))
	now := time.Now()
	ev := claim(t, q, now, 1, "ext")[0]
	if err := q.ExtendLeases(context.Background(), ev.LeaseOwner, []int64{ev.ID}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again := claim(t, q, now.Add(30*time.Minute), 1, "ext"); len(again) != 0 {
		t.Fatal("an extended lease was claimed")
	}
	// Another owner cannot extend it.
	if err := q.ExtendLeases(context.Background(), "someone-else", []int64{ev.ID}, now.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again := claim(t, q, now.Add(2*time.Hour), 1, "ext"); len(again) != 1 {
		t.Fatal("lease was extended by a non-owner")
	}
}

func testRetryWaitsThenDead(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("retry", "1"))
	now := time.Now()
	ev := claim(t, q, now, 1, "retry")[0]
	o := outcome(ev, hookbox.StatusPending, now.Add(10*time.Second))
	o.Error = "connection refused"
	finish(t, q, o)
	if e := status(t, q, ev.ID); e.Status != hookbox.StatusPending || e.LastError != "connection refused" {
		t.Fatalf("after retry: %+v", e)
	}
	if evs := claim(t, q, now.Add(5*time.Second), 1, "retry"); len(evs) != 0 {
		t.Fatal("claimed before the retry time")
	}
	ev = claim(t, q, now.Add(11*time.Second), 1, "retry")[0]
	if ev.Attempts != 2 {
		t.Fatalf("attempts = %d, want 2", ev.Attempts)
	}
	o = outcome(ev, hookbox.StatusDead, now)
	o.Error = "gave up"
	finish(t, q, o)
	if evs := claim(t, q, now.Add(time.Hour), 1, "retry"); len(evs) != 0 {
		t.Fatal("a dead event was claimed")
	}
	e := status(t, q, ev.ID)
	if e.Status != hookbox.StatusDead || len(e.Payload) == 0 {
		t.Fatalf("dead event = %+v (payload must be kept)", e)
	}
}

// claimKey writes one business key through the handler's transaction.
func claimKey(ctx context.Context, tx *hookbox.Tx, key string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ($1, $2)`, "test", key)
	return err
}

func keyExists(t *testing.T, q QueueStore, key string) bool {
	t.Helper()
	found := false
	// Read through Work on a throwaway event to stay inside the interface.
	ingest(t, q, Delivery("probe", key))
	evs := claim(t, q, time.Now(), 1, "probe")
	_, _, err := Work(q, evs, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = $1 AND key = $2`, "test", key).Scan(&n); err != nil {
			t.Errorf("probe: %v", err)
		}
		found = n == 1
		return outcome(*ev, hookbox.StatusDone, time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func testWorkCommitsWithDone(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("w", "1"), Delivery("w", "2"))
	evs := claim(t, q, time.Now(), 2, "w")
	outs, errs, err := Work(q, evs, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		if err := claimKey(ctx, tx, "k"+ev.DeliveryID); err != nil {
			t.Errorf("handler write: %v", err)
		}
		return outcome(*ev, hookbox.StatusDone, time.Now())
	})
	if err != nil || len(outs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Work = %v %v %v", outs, errs, err)
	}
	for _, ev := range evs {
		if e := status(t, q, ev.ID); e.Status != hookbox.StatusDone {
			t.Errorf("event %d status %s", ev.ID, e.Status)
		}
	}
	if !keyExists(t, q, "k1") || !keyExists(t, q, "k2") {
		t.Error("handler writes were not committed with done")
	}
}

// testWorkRollsBackOnFailure: one event of the batch fails; its writes go,
// the others' stay, and it is scheduled for retry in the same transaction.
func testWorkRollsBackOnFailure(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("wf", "ok"), Delivery("wf", "bad"))
	evs := claim(t, q, time.Now(), 2, "wf")
	retryAt := time.Now().Add(time.Hour)
	_, errs, err := Work(q, evs, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		if err := claimKey(ctx, tx, "wf-"+ev.DeliveryID); err != nil {
			t.Errorf("handler write: %v", err)
		}
		if ev.DeliveryID == "bad" {
			// A failing statement must not poison the rest of the batch.
			tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
			o := outcome(*ev, hookbox.StatusPending, retryAt)
			o.Error = "boom"
			return o
		}
		return outcome(*ev, hookbox.StatusDone, time.Now())
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Work: %v %v", errs, err)
	}
	if !keyExists(t, q, "wf-ok") {
		t.Error("the successful handler's write was lost")
	}
	if keyExists(t, q, "wf-bad") {
		t.Error("the failed handler's write was kept")
	}
	for _, ev := range evs {
		e := status(t, q, ev.ID)
		want := hookbox.StatusDone
		if ev.DeliveryID == "bad" {
			want = hookbox.StatusPending
		}
		if e.Status != want {
			t.Errorf("%s: status %s, want %s", ev.DeliveryID, e.Status, want)
		}
	}
}

func testWorkSkipsLostLease(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("wl", "1"))
	now := time.Now()
	old := claim(t, q, now, 1, "wl")
	claim(t, q, now.Add(2*time.Minute), 1, "wl") // taken over
	ran := false
	_, errs, err := Work(q, old, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		ran = true
		return outcome(*ev, hookbox.StatusDone, time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran || !errors.Is(errs[0], hookbox.ErrLeaseLost) {
		t.Fatalf("ran=%v errs=%v: a lost lease must skip the handler", ran, errs)
	}
	if e := status(t, q, old[0].ID); e.Status != hookbox.StatusProcessing {
		t.Fatalf("status %s", e.Status)
	}
}

func testStrictOneInFlight(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("s", "1"), Delivery("s", "2"), Delivery("s", "3"))
	now := time.Now()
	strict := func(at time.Time) []hookbox.Event {
		evs, err := q.Claim(context.Background(), hookbox.ClaimParams{
			Owner: fmt.Sprint("strict-", claimSeq.Add(1)), Limit: 10, Lease: time.Minute,
			Sources: []string{"s"}, Strict: true, Now: at,
		})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	first := strict(now)
	if len(first) != 1 || first[0].DeliveryID != "1" {
		t.Fatalf("first strict claim = %v", first)
	}
	if evs := strict(now); len(evs) != 0 {
		t.Fatalf("second event claimed while the first is in flight: %v", evs)
	}
	finish(t, q, outcome(first[0], hookbox.StatusPending, now.Add(time.Hour)))
	next := strict(now)
	if len(next) != 1 || next[0].DeliveryID != "2" {
		t.Fatalf("after a retry was scheduled, claim = %v, want event 2 (retries reorder)", next)
	}
}

// testClaimWork: one call picks three events, runs two (one done, one
// failed) and leaves the third due, untouched, for the next claim.
func testClaimWork(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("cw", "ok"), Delivery("cw", "bad"), Delivery("cw", "later"))
	owner := fmt.Sprint("cw-", claimSeq.Add(1))
	retryAt := time.Now().Add(time.Hour)
	evs, outs, errs, err := ClaimWork(q, hookbox.ClaimParams{
		Owner: owner, Limit: 10, Lease: time.Minute, Sources: []string{"cw"},
	}, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		switch ev.DeliveryID {
		case "ok":
			if err := claimKey(ctx, tx, "cw-ok"); err != nil {
				t.Errorf("handler write: %v", err)
			}
			return outcome(*ev, hookbox.StatusDone, time.Now())
		case "bad":
			claimKey(ctx, tx, "cw-bad")
			return outcome(*ev, hookbox.StatusPending, retryAt)
		}
		return hookbox.Outcome{} // not run
	})
	if err != nil || len(evs) != 3 || len(outs) != 3 || len(errs) != 3 {
		t.Fatalf("ClaimWork = %d events, %d outcomes, %v", len(evs), len(outs), err)
	}
	for i, ev := range evs {
		e := status(t, q, ev.ID)
		want := map[string]hookbox.Status{"ok": hookbox.StatusDone, "bad": hookbox.StatusPending, "later": hookbox.StatusPending}[ev.DeliveryID]
		if e.Status != want {
			t.Errorf("%s: status %s, want %s", ev.DeliveryID, e.Status, want)
		}
		if ev.DeliveryID == "later" {
			// Not run: left due as it was, no lease, no attempt counted.
			if e.LeaseOwner != "" || e.Attempts != 0 || outs[i].Status != "" || errs[i] != nil {
				t.Errorf("unrun event: %+v, outcome %+v, err %v", e, outs[i], errs[i])
			}
			if as, _ := q.Attempts(context.Background(), ev.ID); len(as) != 0 {
				t.Errorf("attempts recorded for an unrun event: %+v", as)
			}
			continue
		}
		// Every event run counts one attempt, and what the handler saw
		// is what the database holds.
		if e.Attempts != 1 || ev.Attempts != 1 || ev.LeaseOwner != owner || ev.Status != hookbox.StatusProcessing {
			t.Errorf("%s: attempts %d in the database, handler saw %+v; want 1, leased to %s", ev.DeliveryID, e.Attempts, ev, owner)
		}
		// A first attempt that succeeded is read from the event's row,
		// which does not keep who ran it (hookbox.AttemptStored).
		wantOwner, wantOutcome := owner, hookbox.AttemptRetry
		if ev.DeliveryID == "ok" {
			wantOwner, wantOutcome = "", hookbox.AttemptDone
		}
		as, err := q.Attempts(context.Background(), ev.ID)
		if err != nil || len(as) != 1 || as[0].Attempt != 1 || as[0].Owner != wantOwner || as[0].Outcome != wantOutcome {
			t.Errorf("%s: attempts %+v, %v; want one, number 1, %s, by %q", ev.DeliveryID, as, err, wantOutcome, wantOwner)
		}
	}
	if !keyExists(t, q, "cw-ok") || keyExists(t, q, "cw-bad") {
		t.Error("handler writes: the done one must stay, the failed one must go")
	}
}

// runner runs the queue core over q; a handler that breaks its transaction
// is charged a retry an hour later.
func runner(q hookbox.Queue) *queue.Runner {
	return &queue.Runner{Queue: q, Charge: func(ev *hookbox.Event, start time.Time, err error) hookbox.Outcome {
		now := time.Now()
		o := outcome(*ev, hookbox.StatusPending, now.Add(time.Hour))
		o.StartedAt, o.FinishedAt, o.Error = start, now, err.Error()
		return o
	}}
}

// Work is queue.Runner Work over q with its results split into outcomes
// and errors, for tests of a store's work primitives.
func Work(q hookbox.Queue, evs []hookbox.Event, fn hookbox.WorkFunc) ([]hookbox.Outcome, []error, error) {
	res, err := runner(q).Work(context.Background(), evs, fn)
	if err != nil {
		return nil, nil, err
	}
	_, outs, errs := split(res)
	return outs, errs, nil
}

// ClaimWork is queue.Runner ClaimWork over q with its results split.
func ClaimWork(q hookbox.Queue, p hookbox.ClaimParams, fn hookbox.WorkFunc) ([]hookbox.Event, []hookbox.Outcome, []error, error) {
	res, err := runner(q).ClaimWork(context.Background(), p, fn)
	if err != nil {
		return nil, nil, nil, err
	}
	evs, outs, errs := split(res)
	return evs, outs, errs, nil
}

func split(res []queue.Result) ([]hookbox.Event, []hookbox.Outcome, []error) {
	evs := make([]hookbox.Event, len(res))
	outs := make([]hookbox.Outcome, len(res))
	errs := make([]error, len(res))
	for i, r := range res {
		evs[i], outs[i], errs[i] = r.Event, r.Outcome, r.Err
	}
	return evs, outs, errs
}

// testWorkerRecords: a pool that stopped cleanly leaves no record; one that
// did not is seen by the next pool, with where it ran, and dropped once
// stale.
func testWorkerRecords(t *testing.T, q QueueStore) {
	ctx := context.Background()
	w := func(name string) hookbox.Worker { return hookbox.Worker{Name: name, Host: "box", PID: 7} }
	others, err := q.WorkerStarted(ctx, w("a"))
	if err != nil || len(others) != 0 {
		t.Fatalf("first pool: others=%v, %v", others, err)
	}
	if err := q.WorkerStopped(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if others, err := q.WorkerStarted(ctx, w("b")); err != nil || len(others) != 0 {
		t.Fatalf("after a clean stop: others=%v, %v; want none", others, err)
	}
	// b dies without a word; c finds its record.
	if others, err := q.WorkerStarted(ctx, w("c")); err != nil || len(others) != 1 || others[0] != w("b") {
		t.Fatalf("after b died: others=%v, %v; want b's record", others, err)
	}
	if dead, err := q.WorkerSeen(ctx, "c", time.Hour); err != nil || dead != 0 {
		t.Fatalf("WorkerSeen(1h) = %d, %v; want nothing stale yet", dead, err)
	}
	time.Sleep(5 * time.Millisecond) // let b's record age past the threshold below
	if dead, err := q.WorkerSeen(ctx, "c", time.Millisecond); err != nil || dead != 1 {
		t.Fatalf("WorkerSeen(1ms) = %d, %v; want b dropped", dead, err)
	}
	if err := q.WorkerStopped(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if others, err := q.WorkerStarted(ctx, w("d")); err != nil || len(others) != 0 {
		t.Fatalf("after c stopped and b was dropped: others=%v, %v", others, err)
	}
}

// testClaimWorkRescuesOneAlone: events whose lease expired (their worker
// may have died of them) are never run in a shared transaction; with
// Rescue, ClaimWork leases one of them, counted, to be run alone, and
// leaves the others as they were.
func testClaimWorkRescuesOneAlone(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, Delivery("rs", "1"), Delivery("rs", "2"), Delivery("rs", "3"))
	now := time.Now()
	claimed := claim(t, q, now, 3, "rs")
	if len(claimed) != 3 {
		t.Fatalf("claimed %d, want 3", len(claimed))
	}
	ran := 0
	fn := func(context.Context, *hookbox.Tx, *hookbox.Event) hookbox.Outcome {
		ran++
		return hookbox.Outcome{Status: hookbox.StatusDone}
	}
	p := hookbox.ClaimParams{Owner: "r1", Limit: 10, Lease: time.Minute, Sources: []string{"rs"}, Now: now.Add(time.Hour)}
	for _, rescue := range []bool{false, true} {
		p.Rescue = rescue
		res, err := runner(q).ClaimWork(ctx, p, fn)
		if err != nil || len(res) != 3 || ran != 0 {
			t.Fatalf("Rescue %v: ClaimWork = %d results, %v, %d run; want 3 picked, none run", rescue, len(res), err, ran)
		}
		for i, r := range res {
			want := rescue && i == 0
			if r.Rescued != want || r.Ran() {
				t.Errorf("Rescue %v: result %d rescued %v ran %v; want rescued %v", rescue, i, r.Rescued, r.Ran(), want)
			}
			got, err := q.Event(ctx, r.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantAttempts, wantOwner := 1, claimed[i].LeaseOwner
			if want {
				wantAttempts, wantOwner = 2, "r1"
			}
			if got.Attempts != wantAttempts || got.LeaseOwner != wantOwner || got.Status != hookbox.StatusProcessing {
				t.Errorf("Rescue %v: event %d is %s, attempts %d, owner %q; want processing, %d, %q",
					rescue, i, got.Status, got.Attempts, got.LeaseOwner, wantAttempts, wantOwner)
			}
		}
	}
}

// testMarksChargeDeadPool: events a pool picked and marked, whose outcomes
// never committed (its process died), are charged one attempt each once
// the pool has no record, and only then; a committed batch leaves nothing
// to charge; an event worked since its mark is not charged again. The
// marks are read without their events' payloads.
func testMarksChargeDeadPool(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, Delivery("mk", "1"), Delivery("mk", "2"), Delivery("mk", "3"), Delivery("mk2", "4"))
	if _, err := q.WorkerStarted(ctx, hookbox.Worker{Name: "w1"}); err != nil {
		t.Fatal(err)
	}
	r := runner(q)
	// A committed batch: its mark is dropped with the commit.
	p := hookbox.ClaimParams{Owner: "o1", Limit: 10, Lease: time.Minute, Sources: []string{"mk2"},
		Mark: hookbox.Mark{Key: "w1/1", Worker: "w1"}}
	res, err := r.ClaimWork(ctx, p, func(context.Context, *hookbox.Tx, *hookbox.Event) hookbox.Outcome {
		return hookbox.Outcome{Status: hookbox.StatusDone}
	})
	if err != nil || len(res) != 1 || !res[0].Ran() {
		t.Fatalf("ClaimWork mk2 = %v, %v", res, err)
	}
	// A batch picked and marked, never committed: the process died.
	wt, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	picked, _, err := wt.Pick(ctx, hookbox.ClaimParams{Owner: "o2", Limit: 10, Lease: time.Minute, Sources: []string{"mk"}})
	if err != nil || len(picked) != 3 {
		t.Fatalf("Pick = %d events, %v", len(picked), err)
	}
	if err := wt.Mark(ctx, hookbox.Mark{Key: "w1/0", Worker: "w1", Events: picked}); err != nil {
		t.Fatal(err)
	}
	if err := wt.Rollback(); err != nil {
		t.Fatal(err)
	}
	// While w1 has a record, its marks are its own business.
	if res, err := r.Recover(ctx); err != nil || len(res) != 0 {
		t.Fatalf("Recover with w1 alive = %d, %v; want 0", len(res), err)
	}
	// Event 1 is worked meanwhile by someone else (its attempt count moves).
	claimed := claim(t, q, time.Now(), 1, "mk")
	if len(claimed) != 1 || claimed[0].ID != picked[0].ID {
		t.Fatalf("claim = %v, want event %d", claimed, picked[0].ID)
	}
	if err := q.WorkerStopped(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	// The marks come without payloads: the charge reads none, and every
	// dead pool's marks were read at once, each with up to its pool's
	// payload budget (workers.max_payload_bytes) of payloads.
	marks, err := q.OrphanMarks(ctx)
	var marked []hookbox.Event
	for _, m := range marks {
		marked = append(marked, m.Events...)
	}
	if err != nil || len(marked) != 2 {
		t.Fatalf("OrphanMarks after w1 died = %d events, %v; want events 2 and 3", len(marked), err)
	}
	for _, ev := range marked {
		if ev.Payload != nil || ev.PayloadCleared || ev.Source != "mk" || ev.Attempts != 0 {
			t.Errorf("OrphanMarks event %d: %d payload bytes, cleared %v, source %q, attempts %d; want no payload read, not cleared, mk, 0",
				ev.ID, len(ev.Payload), ev.PayloadCleared, ev.Source, ev.Attempts)
		}
	}
	charged := time.Now()
	res, err = r.Recover(ctx)
	if err != nil || len(res) != 2 {
		t.Fatalf("Recover after w1 died = %d, %v; want events 2 and 3 charged", len(res), err)
	}
	for _, ev := range picked[1:] {
		got, err := q.Event(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Left as if its worker had died holding a lease: the next claim
		// rescues it, alone, once the lease ends, when the charged
		// attempt's retry is due (runner's Charge: an hour on). It ended
		// at once: the backoff was skipped.
		if got.Attempts != 1 || got.Status != hookbox.StatusProcessing {
			t.Errorf("event %d after Recover: attempts %d, status %s; want 1, processing", ev.ID, got.Attempts, got.Status)
		}
		if want := charged.Add(time.Hour - time.Minute); got.NextAttemptAt.Before(want) {
			t.Errorf("event %d after Recover: lease ends %v after the charge, want its retry's hour",
				ev.ID, got.NextAttemptAt.Sub(charged).Round(time.Millisecond))
		}
		atts, err := q.Attempts(ctx, ev.ID)
		if err != nil || len(atts) != 1 || atts[0].Owner != "w1/0" || !strings.Contains(atts[0].Error, "process stopped") {
			t.Errorf("attempts of %d = %+v, %v; want one charged to w1/0 for the process", ev.ID, atts, err)
		}
	}
	if got, err := q.Event(ctx, picked[0].ID); err != nil || got.Attempts != 1 {
		t.Errorf("event 1, claimed since its mark: attempts %d, want 1 (not charged again)", got.Attempts)
	}
	if marks, err := q.OrphanMarks(ctx); err != nil || len(marks) != 0 {
		t.Errorf("OrphanMarks after Recover = %+v, %v; want none", marks, err)
	}
	if evs := claim(t, q, time.Now(), 10, "mk"); len(evs) != 0 {
		t.Errorf("a claim after Recover took %d charged events, before their retries are due", len(evs))
	}
}

// testFinishAnyErrorText: what a target answered (invalid UTF-8, NUL)
// does not stop its outcome from being recorded; an outcome that cannot be
// written leaves its event to be run again forever.
func testFinishAnyErrorText(t *testing.T, q QueueStore) {
	ingest(t, q, Delivery("txt", "1"))
	now := time.Now()
	evs := claim(t, q, now, 1, "txt")
	o := outcome(evs[0], hookbox.StatusPending, now.Add(time.Hour))
	o.Error = "reply: \xff\xfe\x00 end"
	if errs := finish(t, q, o); errs[0] != nil {
		t.Fatalf("Finish: %v", errs[0])
	}
	e := status(t, q, evs[0].ID)
	if e.Status != hookbox.StatusPending || !strings.Contains(e.LastError, "end") {
		t.Fatalf("after finish: %s, last error %q", e.Status, e.LastError)
	}
}

// testDueQueues: DueQueues lists exactly the queues with an event due on
// the store's clock: pending and due, or processing with a lease that has
// ended; not one whose events are leased, waiting for a retry, or done.
func testDueQueues(t *testing.T, q QueueStore) {
	due := func(want ...string) {
		t.Helper()
		got, err := q.DueQueues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("due queues %q, want %q", got, want)
		}
	}
	due()
	ingest(t, q, Delivery("dq-a", "1"), Delivery("dq-a", "2"), Delivery("dq-b", "1"), Delivery("dq-c", "1"))
	due("dq-a", "dq-b", "dq-c")
	now := time.Now()
	ev := claim(t, q, now, 1, "dq-c")[0]
	finish(t, q, outcome(ev, hookbox.StatusDone, now))
	ev = claim(t, q, now, 1, "dq-b")[0]
	due("dq-a")
	finish(t, q, outcome(ev, hookbox.StatusPending, now.Add(time.Hour)))
	due("dq-a")
	// Leased for a millisecond: once it has passed, both leases ended.
	evs, err := q.Claim(context.Background(), hookbox.ClaimParams{
		Owner: "short", Limit: 2, Lease: time.Millisecond, Sources: []string{"dq-a"}, Now: now})
	if err != nil || len(evs) != 2 {
		t.Fatalf("claimed %d events of dq-a, %v; want 2", len(evs), err)
	}
	time.Sleep(time.Until(now.Add(10 * time.Millisecond)))
	due("dq-a")
	if evs := claim(t, q, time.Now(), 2, "dq-a"); len(evs) != 2 {
		t.Fatalf("claimed %d events of dq-a again, want 2", len(evs))
	}
	due()
}

// testClaimManySources: a claim or a pick over more sources than one
// SQLite statement may join (500 parts of a compound SELECT) takes what
// is due in all of them.
func testClaimManySources(t *testing.T, q QueueStore) {
	ctx := context.Background()
	var ds []hookbox.Delivery
	var sources []string
	for i := range 1100 {
		src := fmt.Sprint("many-", i)
		sources = append(sources, src)
		ds = append(ds, Delivery(src, "1"))
	}
	ingest(t, q, ds...)
	w, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	picked, _, err := w.Pick(ctx, hookbox.ClaimParams{Limit: 2000, Sources: sources})
	if rerr := w.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || len(picked) != 1100 {
		t.Fatalf("picked %d events of 1,100 sources, %v; want 1,100", len(picked), err)
	}
	if evs := claim(t, q, time.Now(), 700, sources...); len(evs) != 700 {
		t.Fatalf("claimed %d events of 1,100 sources with limit 700, want 700", len(evs))
	}
	if evs := claim(t, q, time.Now(), 2000, sources...); len(evs) != 400 {
		t.Fatalf("claimed %d events, want the 400 left", len(evs))
	}
}
