// Package queue runs Go handlers over stored events inside store
// transactions. It is the one place where claim → run → finish is written;
// the stores (sqlite, postgres) only offer the primitive steps of
// hookbox.Queue and hookbox.WorkTx.
//
// Guarantees:
//   - A handler's writes commit together with its event's outcome, or not
//     at all: each handler runs under its own savepoint, and a failed
//     attempt rolls back to it.
//   - One event cannot stall the others. When a handler breaks the shared
//     transaction (a failed statement it swallowed, a timeout that landed
//     in the middle of a write), the transaction is rolled back, the
//     others run again without it, and it runs again alone. When a
//     transaction fails at its end, each event that ran in it runs again
//     in a transaction of its own.
//   - An event is charged a failed attempt (through Charge, so it goes dead
//     after its last attempt) only when its transaction fails twice in a
//     row, the second time with the event alone in it: a failure of the
//     database itself (a connection cut, a failover), which the next
//     transaction does not meet, costs no event an attempt. A handler that
//     breaks its transaction so runs twice per counted attempt.
//   - An event picked with an expired lease (its worker may have died
//     working it: os.Exit, a fatal error, the OOM killer) is never run in a
//     shared transaction: ClaimWork leases one such event per claim (when
//     ClaimParams.Rescue) with a counted attempt and commits first, so a
//     handler that kills the process is charged every time and goes dead
//     after its last attempt, without taking others down with it.
//   - A process that dies while handlers run over events picked without a
//     lease (ClaimWork) leaves a mark naming them (ClaimParams.Mark),
//     written before the handlers run and dropped by the commit. Recover
//     charges each event of a dead pool's mark the attempt it was making,
//     so a handler that kills the process is counted from its first death.
//   - Events picked without a lease (ClaimWork) that are left unrun, or
//     were not run because another event broke the transaction, are left
//     as they were, due, for the next claim: never leased together, so a
//     batch of leftovers cannot share the fate of one that kills the
//     process.
//   - Only outcomes of events whose lease is still held are applied; the
//     others are reported as hookbox.ErrLeaseLost.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

// Result is what became of one event.
type Result struct {
	Event hookbox.Event
	// Outcome is the attempt's outcome as applied. An empty Status means
	// the event was not run: after ClaimWork it was left due, as it was
	// (unless Rescued); after Work it is still leased to Event.LeaseOwner.
	Outcome hookbox.Outcome
	// Err is hookbox.ErrLeaseLost when the outcome was refused (the lease
	// had moved on) or the event was skipped for that reason.
	Err error
	// Rescued says the event was picked with an expired lease: whoever
	// worked it before may have died of it. ClaimWork does not run such an
	// event with the others; with ClaimParams.Rescue it leases one of them,
	// counting the attempt, so the caller can run it alone (Work) with that
	// attempt already on record. The others are left as they were.
	Rescued bool
}

// Ran reports whether the event was run (its outcome says how it ended).
func (r Result) Ran() bool { return r.Outcome.Status != "" }

// Runner runs handlers over events of one store.
type Runner struct {
	Queue hookbox.Queue
	// Charge turns an error that ended an attempt outside its handler (the
	// handler broke the transaction it ran in) into the outcome to record
	// for ev, whose Attempts is the attempt being charged.
	Charge func(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome
}

// Alone reports whether the handler running on ctx (a WorkFunc's) is alone
// in its transaction: the event must then be run, not left unrun, since
// it may be run alone to find out whether it makes its transaction fail,
// and is charged only after such a run.
func Alone(ctx context.Context) bool { return ctx.Value(aloneKey{}) != nil }

type aloneKey struct{}

// errBroken reports that a handler left its transaction unusable.
var errBroken = errors.New("the handler broke its transaction")

// ClaimWork picks up to p.Limit due events of p.Sources in one transaction,
// runs fn over them, applies their outcomes and commits: one commit for the
// batch, one row write per event. Events fn leaves unrun (an empty Status)
// stay due, untouched, and their results have an empty Outcome. A rescued
// event (see Result) is leased to p.Owner, counted, before the commit.
// p.Strict is not supported: a strict claim must be visible to other
// processes while it runs, so use Claim and Work.
//
// When the shared transaction fails at its end, each event that ran in it
// is worked again in a transaction of its own; if one of those fails (the
// store, not a handler), ClaimWork returns the error with the results of
// the events worked alone before it, which are committed.
func (r *Runner) ClaimWork(ctx context.Context, p hookbox.ClaimParams, fn hookbox.WorkFunc) ([]Result, error) {
	return r.ClaimWorkPicked(ctx, p, nil, fn)
}

// ClaimWorkPicked is ClaimWork that calls picked, when not nil, once the
// pick has returned and before any handler runs, with the events picked
// (none if the pick failed). It is called once, unless the transaction
// could not begin. A caller that bounds the payloads it holds
// (hookbox.ClaimParams.MaxPayloadBytes) so learns what this transaction
// holds as soon as it is known, not when it ends.
func (r *Runner) ClaimWorkPicked(ctx context.Context, p hookbox.ClaimParams, picked func([]hookbox.Event), fn hookbox.WorkFunc) ([]Result, error) {
	wt, err := r.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	stored, at, err := wt.Pick(ctx, p)
	if err != nil {
		stored = nil // rolled back below, not worked
	}
	if picked != nil {
		picked(stored)
	}
	if err != nil || len(stored) == 0 {
		wt.Rollback()
		return nil, err
	}
	if p.Mark.Key != "" {
		m := p.Mark
		m.Events = stored
		if err := wt.Mark(ctx, m); err != nil {
			wt.Rollback()
			return nil, err
		}
	}
	until := at.Add(p.Lease)
	evs := make([]hookbox.Event, len(stored))
	rescued := map[int64]bool{}
	for i, e := range stored {
		if e.Status == hookbox.StatusProcessing {
			rescued[e.ID] = true
		}
		// The state a claim would have left; only events left unrun get it
		// written (LeasePicked).
		e.Status, e.Attempts, e.LeaseOwner = hookbox.StatusProcessing, e.Attempts+1, p.Owner
		e.NextAttemptAt, e.UpdatedAt = until, at
		evs[i] = e
	}
	run := fn
	if len(rescued) > 0 {
		run = func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
			if rescued[ev.ID] {
				return hookbox.Outcome{} // leased below, to be run alone
			}
			return fn(ctx, tx, ev)
		}
	}
	outs, broken, err := runAll(ctx, wt, evs, run)
	if broken >= 0 {
		// The others are left due, as they were, for the next claim; the
		// culprit runs again alone, and is charged if it fails again.
		wt.Rollback()
		return r.soloPicked(ctx, stored[broken], evs[broken], fn)
	}
	if err == nil {
		err = wt.FinishPicked(ctx, outs)
	}
	// One rescued event at most is leased, to be run alone: two leased
	// together would both be charged if one of them kills the process.
	// Without p.Rescue, and past the first, they are left as they are.
	var lease []int64
	for i, o := range outs {
		if o.Status == "" && rescued[evs[i].ID] {
			if p.Rescue && len(lease) == 0 {
				lease = append(lease, evs[i].ID)
			} else {
				delete(rescued, evs[i].ID)
			}
		}
	}
	if err == nil {
		err = wt.LeasePicked(ctx, lease, p.Owner, until, at)
	}
	if err == nil {
		err = wt.Commit(ctx)
	}
	if err != nil {
		wt.Rollback()
		if ranCount(outs) == 0 {
			return nil, err
		}
		// Something the handlers did may have made the end of the shared
		// transaction fail: find out by working each event alone.
		return r.isolatePicked(ctx, stored, evs, outs, fn, err)
	}
	res := make([]Result, len(evs))
	for i := range evs {
		res[i] = Result{Event: evs[i], Outcome: outs[i], Rescued: rescued[evs[i].ID]}
		if outs[i].Status == "" && !rescued[evs[i].ID] {
			res[i].Event = stored[i] // left as it was
		}
	}
	return res, nil
}

// ErrProcessDied is the error charged, by Recover, to each event that was
// running when its pool's process died.
var ErrProcessDied = errors.New("the process stopped while this event's batch of handlers ran (this event's handler, or another's, may have ended it)")

// Recover charges the attempt that was running on each event of an orphan
// mark (hookbox.Queue.OrphanMarks: a pool whose process died while its
// handlers ran, between pick and commit), as an attempt that failed with
// ErrProcessDied, then forgets the marks. An event that kills its process
// is so charged for every death, including one in a shared transaction,
// and goes dead after its last attempt. It returns what it charged (an
// attempt to be retried has Outcome.Status processing, see below), also
// when it fails part way: those charges are committed, to be reported. A
// mark whose event another transaction still holds is kept, and charged
// by a later call.
func (r *Runner) Recover(ctx context.Context) ([]Result, error) {
	marks, err := r.Queue.OrphanMarks(ctx)
	if err != nil {
		return nil, err
	}
	var charged []Result
	var skipped []string // marks an event of which was passed over
	for _, m := range marks {
		passed := false
		for _, ev := range m.Events {
			claimed := ev
			claimed.Status, claimed.Attempts, claimed.LeaseOwner = hookbox.StatusProcessing, ev.Attempts+1, m.Key
			// Unless this was its last attempt, the event is left as one
			// whose worker died holding its lease (processing, the lease
			// ending when its retry is due), so the next claim runs it
			// alone with a counted lease (see Result.Rescued), not in a
			// shared transaction with others it might take down again.
			res, err := r.chargePicked(ctx, ev, claimed, ErrProcessDied, hookbox.StatusProcessing)
			if err != nil {
				return charged, err
			}
			passed = passed || len(res) == 0
			charged = append(charged, res...)
		}
		if passed {
			skipped = append(skipped, m.Key)
			continue
		}
		if err := r.Queue.DropMark(ctx, m.Key); err != nil {
			return charged, err
		}
	}
	if len(skipped) == 0 {
		return charged, nil
	}
	// An event passed over may still be as the dead pool picked it: a
	// transaction holds its row (PostgreSQL's Repick skips locked rows),
	// the dead process's own until its server notices the connection gone
	// (minutes, where a pool is taken for dead after one), or a live
	// pool's that picked it since. Such a mark is kept, to be charged once
	// that transaction has ended (the pools look again at each refresh of
	// their records); the others are dropped. One read for all of them;
	// when it fails, they are all kept for the next look.
	still, err := r.Queue.OrphanMarks(ctx)
	if err != nil {
		return charged, nil
	}
	held := map[string]bool{}
	for _, m := range still {
		held[m.Key] = len(m.Events) > 0
	}
	for _, key := range skipped {
		if held[key] {
			continue
		}
		if err := r.Queue.DropMark(ctx, key); err != nil {
			return charged, err
		}
	}
	return charged, nil
}

// Work runs fn over events claimed earlier with a lease (Claim, or left
// unrun by ClaimWork), in as few transactions as it can: events whose
// lease was lost are skipped (Err is ErrLeaseLost), and one whose handler
// breaks the transaction is left out of a new try at the rest, run again
// alone, and charged if it fails again. Results are in the order of evs.
//
// Work may commit several transactions. When one fails (the store, not a
// handler), Work returns the error with the results: those of the events
// whose outcome was recorded before (Ran, or Err set) stand, and the
// others, with an empty Outcome and no Err, are still leased, as after
// ClaimWork.
func (r *Runner) Work(ctx context.Context, evs []hookbox.Event, fn hookbox.WorkFunc) ([]Result, error) {
	res := make([]Result, len(evs))
	for i := range evs {
		res[i].Event = evs[i]
	}
	todo := make([]int, len(evs))
	for i := range todo {
		todo[i] = i
	}
	failed := make([]bool, len(evs))
	for len(todo) > 0 {
		next, err := r.workOnce(ctx, evs, todo, fn, res, failed)
		if err != nil {
			return res, err
		}
		todo = next
	}
	return res, nil
}

// workOnce works evs[todo] in one transaction, filling res. It returns the
// events to try again: all but the culprit when a handler broke the
// transaction (the culprit runs again alone first). failed marks the
// events whose transaction has failed once already in this Work: they are
// charged when they fail again, alone.
func (r *Runner) workOnce(ctx context.Context, evs []hookbox.Event, todo []int, fn hookbox.WorkFunc, res []Result, failed []bool) ([]int, error) {
	wt, err := r.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	batch := make([]hookbox.Event, len(todo))
	for k, i := range todo {
		batch[k] = evs[i]
	}
	held, err := wt.Hold(ctx, batch)
	if err != nil {
		wt.Rollback()
		return nil, err
	}
	var run []int // positions in todo
	var runEvs []hookbox.Event
	for k, i := range todo {
		if !held[k] {
			res[i].Outcome = hookbox.Outcome{ID: evs[i].ID, Owner: evs[i].LeaseOwner, Attempt: evs[i].Attempts}
			res[i].Err = hookbox.ErrLeaseLost
			continue
		}
		run = append(run, k)
		runEvs = append(runEvs, evs[i])
	}
	if len(run) == 0 {
		wt.Rollback()
		return nil, nil
	}
	runCtx := ctx
	if len(runEvs) == 1 {
		runCtx = context.WithValue(ctx, aloneKey{}, true)
	}
	outs, broken, err := runAll(runCtx, wt, runEvs, fn)
	if broken >= 0 {
		wt.Rollback()
		culprit := todo[run[broken]]
		if failed[culprit] {
			if err := r.chargeHeld(ctx, &evs[culprit], err, &res[culprit]); err != nil {
				return nil, err
			}
		} else {
			failed[culprit] = true // once more, alone
			if _, err := r.workOnce(ctx, evs, []int{culprit}, fn, res, failed); err != nil {
				return nil, err
			}
		}
		var again []int
		for _, k := range run {
			if todo[k] != culprit {
				again = append(again, todo[k])
			}
		}
		return again, nil
	}
	var errs []error
	if err == nil {
		errs, err = wt.Finish(ctx, outs)
	}
	if err == nil {
		err = wt.Commit(ctx)
	}
	if err != nil {
		wt.Rollback()
		n := ranCount(outs)
		if n == 0 {
			return nil, err
		}
		if i := todo[run[0]]; len(run) == 1 && failed[i] {
			return nil, r.chargeHeld(ctx, &evs[i], err, &res[i])
		}
		// Work each event that ran alone (once more, if it was alone), to
		// find the one that made the end of the transaction fail.
		for j, k := range run {
			if outs[j].Status == "" {
				continue // not run: still leased, for a later Work
			}
			failed[todo[k]] = true
			if _, err := r.workOnce(ctx, evs, []int{todo[k]}, fn, res, failed); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	for j, k := range run {
		i := todo[k]
		res[i].Outcome, res[i].Err = outs[j], errs[j]
	}
	return nil, nil
}

// runAll runs fn over evs in wt, each under its own savepoint, opened by
// the handler's first statement (a handler that writes nothing costs
// none), and ends each handler's hookbox.Tx once fn returns (Tx.End). It stops early when wt can keep no more handlers' writes; the
// events after that get a zero outcome. When the savepoint of evs[broken]
// cannot be released or rolled back, the handler broke the transaction:
// runAll returns at once with that index (else -1) and the error.
//
// A handler that does not return (it panics, or calls runtime.Goexit)
// leaves wt rolled back: on SQLite it held the one writer connection, on
// PostgreSQL the picked rows' locks, for as long as the process ran.
func runAll(ctx context.Context, wt hookbox.WorkTx, evs []hookbox.Event, fn hookbox.WorkFunc) (outs []hookbox.Outcome, broken int, err error) {
	returned := false
	defer func() {
		if !returned {
			wt.Rollback()
		}
	}()
	outs, broken, err = runEach(ctx, wt, evs, fn)
	returned = true
	return outs, broken, err
}

// runEach is runAll's loop over the handlers.
func runEach(ctx context.Context, wt hookbox.WorkTx, evs []hookbox.Event, fn hookbox.WorkFunc) (outs []hookbox.Outcome, broken int, err error) {
	outs = make([]hookbox.Outcome, len(evs))
	kept, maxKept := 0, wt.MaxKept()
	for i := range evs {
		if maxKept > 0 && kept == maxKept {
			break
		}
		var spErr error
		htx := wt.Tx(func(ctx context.Context) error {
			spErr = wt.Savepoint(ctx)
			return spErr
		})
		o := fn(ctx, htx, &evs[i])
		// The handler has returned: a goroutine that kept htx must not
		// write into the next handler's savepoint, nor open one of its
		// own, and rows it left open would make the release fail.
		htx.End()
		outs[i] = o
		if spErr != nil {
			return outs, i, fmt.Errorf("%w: open savepoint: %v", errBroken, spErr)
		}
		if !htx.Used() {
			continue // nothing reached the database
		}
		var err error
		if o.Status == hookbox.StatusDone {
			err = wt.Release(ctx)
			kept++
		} else {
			err = wt.RollbackTo(ctx)
		}
		if err != nil {
			return outs, i, fmt.Errorf("%w: %v", errBroken, err)
		}
	}
	return outs, -1, nil
}

func ranCount(outs []hookbox.Outcome) int {
	n := 0
	for _, o := range outs {
		if o.Status != "" {
			n++
		}
	}
	return n
}

// chargeHeld records a failed attempt for a leased event whose handler
// broke its transaction.
func (r *Runner) chargeHeld(ctx context.Context, ev *hookbox.Event, cause error, res *Result) error {
	o := r.Charge(ev, time.Now(), cause)
	errs, err := r.Queue.Finish(ctx, []hookbox.Outcome{o})
	if err != nil {
		return err
	}
	res.Outcome, res.Err = o, errs[0]
	return nil
}

// chargePicked records a failed attempt for an event that was picked, not
// leased, by a transaction its handler broke: in a transaction of its own,
// if nobody has worked the event since. stored is the event as read;
// claimed is it with the claim's state (the attempt being charged). An
// attempt to be retried leaves the event in status retry.
func (r *Runner) chargePicked(ctx context.Context, stored, claimed hookbox.Event, cause error, retry hookbox.Status) ([]Result, error) {
	wt, err := r.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	defer wt.Rollback()
	ok, err := wt.Repick(ctx, []hookbox.Event{stored})
	if err != nil || !ok[0] {
		return nil, err
	}
	o := r.Charge(&claimed, time.Now(), cause)
	if o.Status == hookbox.StatusPending {
		o.Status = retry
	}
	if err := wt.FinishPicked(ctx, []hookbox.Outcome{o}); err != nil {
		return nil, err
	}
	if err := wt.Commit(ctx); err != nil {
		return nil, err
	}
	return []Result{{Event: claimed, Outcome: o}}, nil
}

// isolatePicked works each event of a failed ClaimWork transaction that ran
// in a transaction of its own, charging those that fail alone. Events that
// were not run stay as they were, due again.
func (r *Runner) isolatePicked(ctx context.Context, stored, claimed []hookbox.Event, outs []hookbox.Outcome, fn hookbox.WorkFunc, cause error) ([]Result, error) {
	var res []Result
	for i := range stored {
		if outs[i].Status == "" {
			continue
		}
		one, err := r.soloPicked(ctx, stored[i], claimed[i], fn)
		if err != nil {
			return res, errors.Join(cause, err)
		}
		res = append(res, one...)
	}
	return res, nil
}

// soloPicked works one event in a transaction of its own, if nobody has
// worked it since it was read, and charges it when that fails.
func (r *Runner) soloPicked(ctx context.Context, stored, claimed hookbox.Event, fn hookbox.WorkFunc) ([]Result, error) {
	wt, err := r.Queue.BeginWork(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := wt.Repick(ctx, []hookbox.Event{stored})
	if err != nil || !ok[0] {
		wt.Rollback()
		return nil, err
	}
	evs := []hookbox.Event{claimed}
	outs, broken, err := runAll(context.WithValue(ctx, aloneKey{}, true), wt, evs, fn)
	if err == nil && broken < 0 && outs[0].Status != "" {
		err = wt.FinishPicked(ctx, outs)
		if err == nil {
			err = wt.Commit(ctx)
		}
		if err == nil {
			return []Result{{Event: claimed, Outcome: outs[0]}}, nil
		}
	}
	wt.Rollback()
	if outs == nil || outs[0].Status == "" {
		return nil, err
	}
	return r.chargePicked(ctx, stored, claimed, err, hookbox.StatusPending)
}
