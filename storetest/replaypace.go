package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// backlog is how many dead events the replay pace tests replay: more
// than two of the stores' replay slices, and far more than the default
// pace's first second.
const backlog = 2500

// seedBacklog leaves backlog dead events of source, as an outage that
// ended two hours ago would.
func seedBacklog(t *testing.T, s FullStore, source string) []int64 {
	t.Helper()
	ids := make([]string, backlog)
	for i := range ids {
		ids[i] = fmt.Sprint("down-", i)
	}
	dead := finishAs(t, s, source, hookbox.StatusDead, time.Now().Add(-2*time.Hour), ids...)
	slices.Sort(dead)
	return dead
}

// listed reads the events of source, by id, in one listing: the same
// row as status reads one at a time (Store.Event and Store.Events read the
// same columns), without a query per event for each of backlog events.
// It fails the test unless every id in ids is among them.
func listed(t *testing.T, s FullStore, source string, ids []int64) map[int64]hookbox.Event {
	t.Helper()
	evs, err := s.Events(context.Background(), hookbox.Filter{Source: source, Limit: len(ids) + 100})
	if err != nil {
		t.Fatal(err)
	}
	byID := make(map[int64]hookbox.Event, len(evs))
	for _, e := range evs {
		byID[e.ID] = e
	}
	for _, id := range ids {
		if _, ok := byID[id]; !ok {
			t.Fatalf("event %d is not listed among the %d events of %s", id, len(evs), source)
		}
	}
	return byID
}

// claimAll claims every event of source due at now, batch at a time,
// finishing each done, and returns the ids in the order the claims took
// them (each batch in id order).
func claimAll(t *testing.T, s FullStore, now time.Time, batch int, source string) []int64 {
	t.Helper()
	var order []int64
	for {
		evs := claim(t, s, now, batch, source)
		if len(evs) == 0 {
			return order
		}
		outs := make([]hookbox.Outcome, len(evs))
		for i, e := range evs {
			order, outs[i] = append(order, e.ID), outcome(e, hookbox.StatusDone, now)
		}
		for i, err := range finish(t, s, outs...) {
			if err != nil {
				t.Fatalf("finish %d: %v", evs[i].ID, err)
			}
		}
	}
}

// testReplayLetsLiveThrough: a delivery stored just after a large replay
// is claimed among the first of the replayed events, not behind them all.
// Claims take events in due order, so the replay paces the due times of
// what it replays (ReplayParams.Rate, DefaultReplayRate): the live one
// waits behind the first second's worth and those due in the time
// between the replay's start and its own arrival, read back from the
// stored due times, so the bound holds however slow the machine is.
// Claimed in batches of 25, it is then worked like the rest: every event
// ends done.
func testReplayLetsLiveThrough(t *testing.T, s FullStore) {
	const batch = 25
	dead := seedBacklog(t, s, "outage")
	res := replay(t, s, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "outage", Status: hookbox.StatusDead}})
	if !slices.Equal(res.Replayed, dead) {
		t.Fatalf("replayed %d events, want the %d dead", len(res.Replayed), len(dead))
	}
	live := ingest(t, s, Delivery("outage", "live"))[0].ID
	started, arrived := status(t, s, dead[0]).NextAttemptAt, status(t, s, live).NextAttemptAt
	// Every event is due an hour from now: the claims read only the order.
	order := claimAll(t, s, time.Now().Add(time.Hour), batch, "outage")
	if len(order) != backlog+1 {
		t.Fatalf("claimed %d events, want the %d replayed and the live one", len(order), backlog+1)
	}
	before := slices.Index(order, live) / batch * batch // claimed in the batches before the live one's
	ahead := hookbox.DefaultReplayRate + int(float64(hookbox.DefaultReplayRate)*arrived.Sub(started).Seconds()) + 1
	if before > ahead || before >= backlog {
		t.Fatalf("the live delivery was claimed after %d of the %d replayed events; want at most %d "+
			"(the first second's worth and those due in the %v between the replay's start and its arrival)",
			before, backlog, ahead, arrived.Sub(started))
	}
	all := append(dead, live)
	finished := listed(t, s, "outage", all)
	for _, id := range all {
		if e := finished[id]; e.Status != hookbox.StatusDone {
			t.Fatalf("event %d is %s after every claim was worked, want done", id, e.Status)
		}
	}
}

// testReplayPacesDueTimes: a large replay spreads the due times of its
// events at the pace asked (ReplayParams.Rate): the first Rate are due at
// the replay's start, each later one 1/Rate s after the one before, in
// id order across the store's slices; ReplayAtOnce makes all due at the
// start, as a dry run counts the same events either way.
func testReplayPacesDueTimes(t *testing.T, s FullStore) {
	for _, c := range []struct {
		source string
		rate   int
	}{{"paced", 500}, {"at-once", hookbox.ReplayAtOnce}} {
		t.Run(c.source, func(t *testing.T) {
			dead := seedBacklog(t, s, c.source)
			p := hookbox.ReplayParams{Filter: hookbox.Filter{Source: c.source}, Rate: c.rate, DryRun: true}
			if dry := replay(t, s, p); !slices.Equal(dry.Replayed, dead) {
				t.Fatalf("dry run counts %d, want %d", len(dry.Replayed), len(dead))
			}
			p.DryRun = false
			if res := replay(t, s, p); !slices.Equal(res.Replayed, dead) {
				t.Fatalf("replayed %d events, want %d", len(res.Replayed), len(dead))
			}
			paced := listed(t, s, c.source, dead)
			start := paced[dead[0]].NextAttemptAt
			for i, id := range dead {
				e := paced[id]
				want := p.ReplayWait(i)
				// The store's slices may each start at their own
				// transaction's now (PostgreSQL), a little later.
				if got := e.NextAttemptAt.Sub(start); got < want-time.Millisecond || got > want+10*time.Second {
					t.Fatalf("replayed event %d (the %dth) is due %v after the first, want %v", id, i, got, want)
				}
			}
			if c.rate > 0 {
				last := paced[dead[len(dead)-1]].NextAttemptAt.Sub(start)
				if want := time.Duration(backlog-c.rate) * time.Second / time.Duration(c.rate); last < want-time.Millisecond {
					t.Fatalf("the last replayed event is due %v after the first, want %v", last, want)
				}
			}
			if got := claimAll(t, s, time.Now().Add(time.Hour), 500, c.source); len(got) != len(dead) {
				t.Fatalf("worked %d of the %d replayed", len(got), len(dead))
			}
		})
	}
}

// testReplaySmallIsImmediate: a replay of a handful of events, and of
// one event named, is due at once: a claim made right after it, at its
// Now, takes every event.
func testReplaySmallIsImmediate(t *testing.T, s FullStore) {
	few := finishAs(t, s, "few", hookbox.StatusDead, time.Now(), "1", "2", "3", "4", "5")
	one := finishAs(t, s, "one", hookbox.StatusDead, time.Now(), "1")
	for _, c := range []struct {
		source string
		p      hookbox.ReplayParams
		want   []int64
	}{
		{"few", hookbox.ReplayParams{Filter: hookbox.Filter{Source: "few"}}, few},
		{"one", hookbox.ReplayParams{IDs: one}, one},
	} {
		c.p.Now = time.Now().Truncate(time.Millisecond)
		if res, err := s.Replay(context.Background(), c.p); err != nil || !slices.Equal(res.Replayed, c.want) {
			t.Fatalf("replay of %s = %v, %v; want %v", c.source, res.Replayed, err, c.want)
		}
		var got []int64
		for _, e := range claim(t, s, c.p.Now, 10, c.source) {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("a claim at the replay's now took %v of %s, want %v", got, c.source, c.want)
		}
	}
}

// testReplayPaceKeepsKeyOrder: a paced replay of an ordered target's dead
// deliveries (many per order key, more than the first second's worth)
// keeps each key's order: claims by key, once all are due, take each
// key's deliveries one at a time in id order, and work every one. The
// pace follows id order, so no delivery of a key is due before an
// earlier one of the same key.
func testReplayPaceKeepsKeyOrder(t *testing.T, s FullStore) {
	ctx := context.Background()
	const perKey = 80
	keys := []string{"k1", "k2", "k3"}
	var ds []hookbox.Delivery
	for i := range perKey {
		for _, k := range keys {
			ds = append(ds, Keyed("ordered", "app", fmt.Sprint(k, "-", i), k))
		}
	}
	ingest(t, s, ds...)
	q := hookbox.QueueName("ordered", "app")
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("keys-", claimSeq.Add(1)), Limit: len(ds),
		Lease: time.Minute, Sources: []string{q}})
	if err != nil || len(evs) != len(ds) {
		t.Fatalf("claim: %d of %d, %v", len(evs), len(ds), err)
	}
	outs := make([]hookbox.Outcome, len(evs))
	for i, e := range evs {
		outs[i] = outcome(e, hookbox.StatusDead, time.Now())
	}
	finish(t, s, outs...)
	res := replay(t, s, hookbox.ReplayParams{Filter: hookbox.Filter{Source: q, Status: hookbox.StatusDead}})
	if len(res.Replayed) != len(ds) {
		t.Fatalf("replayed %d, want %d", len(res.Replayed), len(ds))
	}
	later := time.Now().Add(time.Hour)
	worked := map[string][]int64{}
	after := ""
	for n := 0; n < len(ds); {
		got, err := s.Claim(ctx, hookbox.ClaimParams{Owner: fmt.Sprint("keys-", claimSeq.Add(1)), Limit: 10,
			Lease: time.Minute, Sources: []string{q}, ByKey: true, AfterKey: after, Now: later})
		if err != nil || len(got) == 0 {
			t.Fatalf("claim by key after %d of %d worked: %v, %v", n, len(ds), got, err)
		}
		seen := map[string]bool{}
		outs := make([]hookbox.Outcome, len(got))
		for i, e := range got {
			if seen[e.OrderKey] {
				t.Fatalf("one claim took two deliveries of key %s", e.OrderKey)
			}
			seen[e.OrderKey] = true
			worked[e.OrderKey] = append(worked[e.OrderKey], e.ID)
			outs[i], after = outcome(e, hookbox.StatusDone, later), max(after, e.OrderKey)
		}
		finish(t, s, outs...)
		n += len(got)
	}
	for _, k := range keys {
		if len(worked[k]) != perKey || !slices.IsSorted(worked[k]) {
			t.Errorf("key %s worked %d deliveries in the order %v, want %d in id order", k, len(worked[k]), worked[k], perKey)
		}
	}
}

// testReplayResumedKeepsPace: a replay that stopped part-way, and the one
// that goes on from it (AfterID), pace their events as one replay: in id
// order, no event the second makes due is due before one the first
// paced, so a strict source still works them in id order and a live
// delivery waits behind one second's worth of them, not two.
func testReplayResumedKeepsPace(t *testing.T, s FullStore) {
	dead := seedBacklog(t, s, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := hookbox.Filter{Source: "resumed", Status: hookbox.StatusDead}
	stopped, err := s.Replay(ctx, hookbox.ReplayParams{Filter: f, Progress: func(n int) {
		if n > 0 {
			cancel()
		}
	}})
	if err == nil || stopped.ResumeAfter == nil || len(stopped.Replayed) == 0 {
		t.Fatalf("a replay cancelled after its first slice: %d replayed, ResumeAfter %v, err %v", len(stopped.Replayed), stopped.ResumeAfter, err)
	}
	rest := replay(t, s, resumeParams(hookbox.ReplayParams{Filter: f}, stopped))
	if got := len(stopped.Replayed) + len(rest.Replayed); got != len(dead) {
		t.Fatalf("the two runs replayed %d events, want %d", got, len(dead))
	}
	paced := listed(t, s, "resumed", dead)
	var last time.Time
	for i, id := range dead {
		due := paced[id].NextAttemptAt
		if due.Before(last) {
			t.Fatalf("replayed event %d (the %dth, the first run replayed %d) is due at %v, before the one before it (%v): "+
				"the run that went on started its pace again", id, i, len(stopped.Replayed), due, last)
		}
		last = due
	}
}

// resumeParams is p going on where the replay stopped stopped.
func resumeParams(p hookbox.ReplayParams, stopped hookbox.ReplayResult) hookbox.ReplayParams {
	p.AfterID, p.PaceAfter = *stopped.ResumeAfter, stopped.PacedCount
	return p
}
