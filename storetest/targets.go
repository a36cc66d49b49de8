package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// Keyed is a delivery of source routed to its one named target under
// order key key.
func Keyed(source, target, id, key string) hookbox.Delivery {
	return fanOut(source, id, target+"="+key)
}

// fanOut builds a delivery of a source with named targets, routed to the
// given targets (a "name=key" target carries an order key).
func fanOut(source, id string, targets ...string) hookbox.Delivery {
	d := Delivery(source, id)
	d.FanOut = true
	for _, t := range targets {
		name, key, _ := cutEq(t)
		d.Routes = append(d.Routes, hookbox.Route{Target: name, OrderKey: key})
	}
	return d
}

func cutEq(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// testStoredListingPages: the events listed as stored (FanOut events
// with no delivery: a store_only source's, and those no target's filter
// matched), page by page, with and without a source, are the ones a
// listing of every event shows as stored, newest first: not a FanOut
// event with a delivery, nor an ordinary event, however finished.
func testStoredListingPages(t *testing.T, q QueueStore) {
	ctx := context.Background()
	var ds []hookbox.Delivery
	for i := range 40 {
		switch i % 4 {
		case 0:
			ds = append(ds, fanOut("so", fmt.Sprint("k", i))) // store_only
		case 1:
			ds = append(ds, fanOut("fo", fmt.Sprint("f", i), "a"))
		case 2:
			ds = append(ds, Delivery("plain", fmt.Sprint("p", i)))
		default:
			if i%8 == 3 {
				ds = append(ds, fanOut("fo", fmt.Sprint("n", i))) // no target matched
			} else {
				ds = append(ds, fanOut("fo", fmt.Sprint("f", i), "a", "b"))
			}
		}
	}
	ingest(t, q, ds...)
	for _, c := range []struct {
		source string
		want   int
	}{{"", 15}, {"so", 10}, {"fo", 5}, {"plain", 0}, {"nosuch", 0}} {
		all, err := q.Events(ctx, hookbox.Filter{Source: c.source, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var walked []int64
		for _, e := range all {
			if e.Status == hookbox.StatusStored {
				walked = append(walked, e.ID)
			}
		}
		var paged []int64
		for f := (hookbox.Filter{Source: c.source, Status: hookbox.StatusStored, Limit: 4}); ; {
			evs, err := q.Events(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if !e.FanOut || e.Status != hookbox.StatusStored {
					t.Errorf("listed as stored: %+v", e)
				}
				paged = append(paged, e.ID)
			}
			if len(evs) < f.Limit {
				break
			}
			f.BeforeID = evs[len(evs)-1].ID
		}
		if len(paged) != c.want || !slices.Equal(paged, walked) {
			t.Errorf("stored events of %q, four a page: %v, want %d: %v", c.source, paged, c.want, walked)
		}
	}
}

// testFanOut: an event of a source with targets is stored once with a
// delivery per route; each delivery is a queue row of its own, the event
// is never claimed, its status summarises its deliveries, a replay of it
// replays its failed deliveries (listing the done one as skipped), and a
// purge takes them with it, only once all are finished.
func testFanOut(t *testing.T, q QueueStore) {
	ctx := context.Background()
	rs := ingest(t, q, fanOut("fo", "1", "a", "b=k1"), fanOut("fo", "none"))
	if dup := ingest(t, q, fanOut("fo", "1", "a", "b=k1")); !dup[0].Duplicate || dup[0].ID != rs[0].ID {
		t.Fatalf("a repeat of a fanned-out event: %+v", dup)
	}
	ev := status(t, q, rs[0].ID)
	if !ev.FanOut || ev.Status != hookbox.StatusPending || ev.Parent != 0 || string(ev.Payload) != `{"id":"1"}` {
		t.Fatalf("the event = %+v", ev)
	}
	if e := status(t, q, rs[1].ID); e.Status != hookbox.StatusStored {
		t.Errorf("an event no target wanted is %s, want stored", e.Status)
	}
	all, err := q.Events(ctx, hookbox.Filter{Source: "fo"})
	if err != nil || len(all) != 4 {
		t.Fatalf("events of the source and its deliveries: %d, %v; want 4", len(all), err)
	}
	if evs := claim(t, q, time.Now(), 10, "fo"); len(evs) != 0 {
		t.Fatalf("a fanned-out event was claimed: %+v", evs)
	}
	a := claim(t, q, time.Now(), 10, "fo/a")
	b := claim(t, q, time.Now(), 10, "fo/b")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("claimed %d for a and %d for b, want 1 each", len(a), len(b))
	}
	if d := b[0]; d.Parent != rs[0].ID || d.Target != "b" || d.OrderKey != "k1" || d.DeliveryID != "1" ||
		string(d.Payload) != `{"id":"1"}` || d.Header.Get("Content-Type") != "application/json" || d.SourceName() != "fo" {
		t.Errorf("the delivery to b = %+v", d)
	}
	if e := status(t, q, rs[0].ID); e.Status != hookbox.StatusProcessing {
		t.Errorf("event with deliveries in flight is %s, want processing", e.Status)
	}
	now := time.Now()
	finish(t, q, outcome(a[0], hookbox.StatusDone, now), outcome(b[0], hookbox.StatusDead, now))
	if e := status(t, q, rs[0].ID); e.Status != hookbox.StatusDead {
		t.Errorf("event with a dead delivery is %s, want dead", e.Status)
	}
	if dead, err := q.Events(ctx, hookbox.Filter{Source: "fo", Status: hookbox.StatusDead}); err != nil || len(dead) != 2 {
		t.Errorf("dead rows of the source: %d, %v; want the event and its delivery to b", len(dead), err)
	}
	st, err := q.Stats(ctx, now)
	if err != nil || st.ByStatus[hookbox.StatusDone] != 1 || st.ByStatus[hookbox.StatusDead] != 1 {
		t.Errorf("stats count the deliveries only: %+v, %v", st, err)
	}
	// Not finished (b is dead): a purge of done rows keeps the event.
	if res, err := q.Purge(ctx, hookbox.PurgeParams{Before: time.Now()}); err != nil || res.Stored != 1 || res.Done != 0 {
		t.Errorf("purge of done events: %+v, %v; want only the event no target wanted, counted as stored", res, err)
	}
	if _, err := q.Event(ctx, b[0].ID); err != nil {
		t.Fatalf("a purge took the dead delivery of a kept event: %v", err)
	}
	// The done delivery is left alone, and listed as such (see
	// ReplayFanOutReportsEachDelivery).
	res, err := q.Replay(ctx, hookbox.ReplayParams{IDs: []int64{rs[0].ID}})
	if err != nil || !slices.Equal(res.Replayed, []int64{b[0].ID}) || !slices.Equal(res.Skipped, []int64{a[0].ID}) {
		t.Fatalf("replay of the event = %+v, %v; want its dead delivery replayed, the done one skipped", res, err)
	}
	if e := status(t, q, rs[0].ID); e.Status != hookbox.StatusPending || !e.FanOut {
		t.Errorf("after the replay the event is %+v", e)
	}
	b = claim(t, q, time.Now(), 10, "fo/b")
	if len(b) != 1 || b[0].Attempts != 2 {
		t.Fatalf("replayed delivery claimed as %+v", b)
	}
	finish(t, q, outcome(b[0], hookbox.StatusDone, time.Now()))
	ingestNewer(t, q)
	time.Sleep(2 * time.Millisecond) // a cut-off strictly after the last finish
	if res, err := q.Purge(ctx, hookbox.PurgeParams{Before: time.Now()}); err != nil || res.Done != 1 || res.Stored != 0 {
		t.Errorf("purge once all deliveries are done: %+v, %v; want the event, counted as done", res, err)
	}
	for _, id := range []int64{rs[0].ID, a[0].ID, b[0].ID} {
		if _, err := q.Event(ctx, id); err == nil {
			t.Errorf("row %d outlived the purge of its event", id)
		}
		if as, err := q.Attempts(ctx, id); err != nil || len(as) != 0 {
			t.Errorf("attempts of row %d outlived the purge of its event: %v, %v", id, as, err)
		}
	}
}

// testFanOutPurgedAsDead: a purge counts a FanOut event under the status
// an operator reads, its deliveries': dead when one is dead, in a dry run
// and a real one (it was counted done, its own row's status).
func testFanOutPurgedAsDead(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, fanOut("fd", "1", "a", "b"))
	now := time.Now()
	a, b := claim(t, q, now, 10, "fd/a"), claim(t, q, now, 10, "fd/b")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("claimed %d and %d deliveries, want 1 each", len(a), len(b))
	}
	finish(t, q, outcome(a[0], hookbox.StatusDone, now), outcome(b[0], hookbox.StatusDead, now))
	ingestNewer(t, q)
	time.Sleep(2 * time.Millisecond) // a cut-off strictly after the last finish
	want := hookbox.PurgeResult{Dead: 1}
	for _, dry := range []bool{true, false} {
		if res, err := q.Purge(ctx, hookbox.PurgeParams{Before: time.Now(), IncludeDead: true, DryRun: dry}); err != nil || res != want {
			t.Errorf("purge (dry run %v) of an event with a dead delivery = %+v, %v; want %+v", dry, res, err, want)
		}
	}
}

// testFanOutPayloadKept: payload retention leaves the payload of an event
// whose deliveries are still to be worked.
func testFanOutPayloadKept(t *testing.T, q QueueStore) {
	ctx := context.Background()
	d := fanOut("fp", "1", "a")
	d.ReceivedAt = time.Now().Add(-48 * time.Hour)
	rs := ingest(t, q, d)
	if n, err := q.ClearPayloads(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("ClearPayloads with a delivery pending = %d, %v; want 0", n, err)
	}
	if e := status(t, q, rs[0].ID); e.PayloadCleared {
		t.Fatal("the payload of an event with a pending delivery was cleared")
	}
}

// testClaimByKey: with ByKey, deliveries with the same order key are
// claimed one at a time in id order, a dead one holds its key unless
// SkipDead, a claim starting after a key wraps around to the others, and
// a delivery without a key is never claimed by key.
func testClaimByKey(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, fanOut("ok", "1", "t=k1"), fanOut("ok", "2", "t=k1"), fanOut("ok", "3", "t=k2"),
		fanOut("ok", "4", "t"), fanOut("ok", "5", "t=k2"))
	byKey := func(skipDead bool, after ...string) []string {
		t.Helper()
		p := hookbox.ClaimParams{Owner: "bk" + time.Now().String(), Limit: 10, Lease: time.Minute,
			Sources: []string{"ok/t"}, ByKey: true, SkipDead: skipDead}
		if len(after) > 0 {
			p.AfterKey, p.Limit = after[0], 1
		}
		evs, err := q.Claim(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range evs {
			ids = append(ids, e.DeliveryID)
		}
		return ids
	}
	if got := byKey(false, "k1"); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("claim of one after k1 = %v, want k2's first", got)
	}
	if got := byKey(false, "k2"); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("claim of one after k2 = %v, want k1's first (wrapped around)", got)
	}
	if again := byKey(false); len(again) != 0 {
		t.Fatalf("claimed %v while the earlier deliveries of their keys run", again)
	}

	evs, err := q.Events(ctx, hookbox.Filter{Source: "ok/t", Status: hookbox.StatusProcessing})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range evs {
		st := hookbox.StatusDone
		if e.DeliveryID == "1" {
			st = hookbox.StatusDead
		}
		finish(t, q, outcome(e, st, now))
	}
	if got := byKey(false); !slices.Equal(got, []string{"5"}) {
		t.Fatalf("after k1's first died and k2's finished: claimed %v, want only 5", got)
	}
	if got := byKey(true); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("skipping dead deliveries: claimed %v, want 2", got)
	}
}

// testFillOrderKeys: deliveries of an ordered queue stored without an
// order key (before the target had order_by) are never claimed by key;
// FillOrderKeys gives each unfinished one the key it is asked to (a
// pending one, one waiting for its retry, a dead one once replayed, not
// a finished one), after which claims by key take them beside the keyed
// deliveries, which still run one per key.
func testFillOrderKeys(t *testing.T, q QueueStore) {
	ctx := context.Background()
	own := func(deliveryID string) string { return "own:" + deliveryID }
	fill := func(want int) {
		t.Helper()
		n, err := q.FillOrderKeys(ctx, "fk/t", own)
		if err != nil || n != want {
			t.Fatalf("FillOrderKeys = %d, %v; want %d", n, err, want)
		}
	}
	ids := func(evs []hookbox.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.DeliveryID)
		}
		slices.Sort(out)
		return out
	}
	byKey := func() []string {
		t.Helper()
		return ids(claimByKey(t, q, hookbox.ClaimParams{Limit: 10, Sources: []string{"fk/t"}}))
	}

	// Stored and worked while the target had no order_by.
	ingest(t, q, fanOut("fk", "retry", "t"), fanOut("fk", "dead", "t"), fanOut("fk", "done", "t"))
	now := time.Now()
	for _, e := range claim(t, q, now, 10, "fk/t") {
		o := outcome(e, hookbox.StatusDone, now)
		switch e.DeliveryID {
		case "retry":
			o.Status, o.RetryAt = hookbox.StatusPending, now.Add(time.Hour)
		case "dead":
			o.Status = hookbox.StatusDead
		}
		finish(t, q, o)
	}
	ingest(t, q, fanOut("fk", "old", "t"))
	// Stored once it had.
	ingest(t, q, Keyed("fk", "t", "k1a", "k1"), Keyed("fk", "t", "k1b", "k1"), Keyed("fk", "t", "k2", "k2"))

	fill(2)
	keys := map[string]string{}
	evs, err := q.Events(ctx, hookbox.Filter{Source: "fk/t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		keys[e.DeliveryID] = e.OrderKey
	}
	want := map[string]string{"old": "own:old", "retry": "own:retry", "dead": "", "done": "",
		"k1a": "k1", "k1b": "k1", "k2": "k2"}
	if !maps.Equal(keys, want) {
		t.Fatalf("order keys after FillOrderKeys = %v, want %v", keys, want)
	}
	fill(0)
	if got := byKey(); !slices.Equal(got, []string{"k1a", "k2", "old"}) {
		t.Fatalf("claim by key = %v, want old beside the head of each key (k1a, k2)", got)
	}

	var dead hookbox.Event
	for _, e := range evs {
		if e.DeliveryID == "dead" {
			dead = e
		}
	}
	if res, err := q.Replay(ctx, hookbox.ReplayParams{IDs: []int64{dead.ID}}); err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay of the dead delivery: %+v, %v", res, err)
	}
	if got := byKey(); len(got) != 0 {
		t.Fatalf("claim by key = %v before the replayed delivery has a key, want none (k1b waits for k1a)", got)
	}
	fill(1)
	if got := byKey(); !slices.Equal(got, []string{"dead"}) {
		t.Fatalf("claim by key after the replayed delivery got its key = %v, want it alone", got)
	}
}

// testFillOrderKeysRounds: one FillOrderKeys call keys every keyless
// delivery of the queue however many rounds that takes, with keyed
// deliveries due before and among them and due times shared by many rows
// (each round carries on after the last row the one before read).
func testFillOrderKeysRounds(t *testing.T, q QueueStore) {
	ctx := context.Background()
	var ds []hookbox.Delivery
	for i := range 1500 {
		ds = append(ds, Keyed("fr", "t", fmt.Sprint("keyed-", i), fmt.Sprint("k", i%7)))
	}
	for i := range 2500 {
		ds = append(ds, fanOut("fr", fmt.Sprint("old-", i), "t"))
		if i%3 == 0 {
			ds = append(ds, Keyed("fr", "t", fmt.Sprint("among-", i), "k1"))
		}
	}
	for c := range slices.Chunk(ds, 250) {
		ingest(t, q, c...)
	}
	n, err := q.FillOrderKeys(ctx, "fr/t", func(id string) string { return "own:" + id })
	if err != nil || n != 2500 {
		t.Fatalf("FillOrderKeys = %d, %v; want 2500 in one call", n, err)
	}
	evs, err := q.Events(ctx, hookbox.Filter{Source: "fr/t", Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.HasPrefix(e.DeliveryID, "old-") && e.OrderKey != "own:"+e.DeliveryID {
			t.Fatalf("%s has order key %q after FillOrderKeys", e.DeliveryID, e.OrderKey)
		}
	}
	if n, err := q.FillOrderKeys(ctx, "fr/t", func(id string) string { return "own:" + id }); err != nil || n != 0 {
		t.Fatalf("second FillOrderKeys = %d, %v; want 0", n, err)
	}
}

// testClaimByKeyWhileOneRuns: a key is busy while any of its deliveries
// is leased, whatever the ids say. A delivery replayed after a later one
// of its key started (or, on PostgreSQL, committed by another ingest
// transaction after it) heads the key by id, yet waits until the running
// one finishes.
func testClaimByKeyWhileOneRuns(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, fanOut("run", "1", "t=k1"), fanOut("run", "2", "t=k1"), fanOut("run", "3", "t=k2"))
	byKey := func() []hookbox.Event {
		t.Helper()
		return claimByKey(t, q, hookbox.ClaimParams{Limit: 10, Sources: []string{"run/t"}})
	}
	ids := func(evs []hookbox.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.DeliveryID)
		}
		return out
	}
	first := byKey()
	if got := ids(first); !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("first claim = %v, want the head of each key (1, 3)", got)
	}
	finish(t, q, outcome(first[0], hookbox.StatusDone, time.Now()))
	second := byKey()
	if got := ids(second); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("after 1 finished: claimed %v, want 2", got)
	}
	res, err := q.Replay(ctx, hookbox.ReplayParams{IDs: []int64{first[0].ID}, IncludeDone: true})
	if err != nil || !slices.Equal(res.Replayed, []int64{first[0].ID}) {
		t.Fatalf("replay of the first delivery: %+v, %v", res, err)
	}
	if got := ids(byKey()); len(got) != 0 {
		t.Fatalf("claimed %v while 2, of the same key, runs", got)
	}
	finish(t, q, outcome(second[0], hookbox.StatusDone, time.Now()))
	if got := ids(byKey()); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("after 2 finished: claimed %v, want the replayed 1", got)
	}
}

// testClaimByKeyRunning: a key the claimer says it runs
// (ClaimParams.RunningKeys) is passed, even when the lease of its delivery
// has ended and the store alone would hand that delivery out again.
func testClaimByKeyRunning(t *testing.T, q QueueStore) {
	ingest(t, q, fanOut("runs", "1", "t=k1"), fanOut("runs", "2", "t=k1"), fanOut("runs", "3", "t=k2"),
		fanOut("runs", "4", "t=k3"))
	ids := func(evs []hookbox.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.DeliveryID)
		}
		return out
	}
	if got := ids(claimByKey(t, q, hookbox.ClaimParams{Limit: 2, Sources: []string{"runs/t"}})); !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("first claim = %v, want 1 and 3", got)
	}
	// Two minutes later their leases of one minute have ended, as when
	// extensions could not reach the database while they ran.
	later := time.Now().Add(2 * time.Minute)
	got := ids(claimByKey(t, q, hookbox.ClaimParams{Limit: 10, Sources: []string{"runs/t"}, Now: later, RunningKeys: []string{"k1", "k3"}}))
	if !slices.Equal(got, []string{"3"}) {
		t.Fatalf("claim with k1 and k3 running = %v, want only 3 (k2's, its lease over); k1 and k3 passed", got)
	}
	if got := ids(claimByKey(t, q, hookbox.ClaimParams{Limit: 10, Sources: []string{"runs/t"}, Now: later})); !slices.Equal(got, []string{"1", "4"}) {
		t.Fatalf("claim without RunningKeys = %v, want 1 again (its lease over) and 4", got)
	}
}

// testClaimSkipsRunning: a plain claim takes none of the events the
// claimer says it runs (ClaimParams.RunningIDs), even when their leases
// have ended.
func testClaimSkipsRunning(t *testing.T, q QueueStore) {
	ctx := context.Background()
	rs := ingest(t, q, Delivery("skip", "1"), Delivery("skip", "2"), Delivery("skip", "3"))
	claim := func(p hookbox.ClaimParams) (out []string) {
		t.Helper()
		p.Owner, p.Lease, p.Sources = fmt.Sprint("skip-", claimSeq.Add(1)), time.Minute, []string{"skip"}
		evs, err := q.Claim(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			out = append(out, e.DeliveryID)
		}
		return out
	}
	if got := claim(hookbox.ClaimParams{Limit: 2}); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("first claim = %v, want 1 and 2", got)
	}
	if got := claim(hookbox.ClaimParams{Limit: 1}); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("second claim = %v, want 3", got)
	}
	// Two minutes later the leases of one minute have ended, 1's and 2's
	// first. A claim of one passes over the two it runs rather than stop
	// at them.
	later := time.Now().Add(2 * time.Minute)
	if got := claim(hookbox.ClaimParams{Limit: 1, Now: later, RunningIDs: []int64{rs[0].ID, rs[1].ID}}); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("claim of 1 with 1 and 2 running = %v, want 3 (its lease over)", got)
	}
	got := claim(hookbox.ClaimParams{Limit: 10, Now: later})
	slices.Sort(got)
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("claim without RunningIDs = %v, want 1 and 2 again (their leases over)", got)
	}
}

// testClaimByKeyWalksOn: a claim by key visits at most MaxKeys keys per
// walk; one that found them all blocked says where it stopped
// (KeyCursor), so that the next claim, starting there, reaches the keys
// past them instead of walking the same blocked ones again.
func testClaimByKeyWalksOn(t *testing.T, q QueueStore) {
	var ds []hookbox.Delivery
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k9"} {
		ds = append(ds, fanOut("walk", k, "t="+k))
	}
	ingest(t, q, ds...)
	claimKeys := func(after string, limit, maxKeys int, cursor *string) []string {
		t.Helper()
		var keys []string
		for _, e := range claimByKey(t, q, hookbox.ClaimParams{Limit: limit, Sources: []string{"walk/t"},
			AfterKey: after, MaxKeys: maxKeys, KeyCursor: cursor}) {
			keys = append(keys, e.OrderKey)
		}
		return keys
	}
	// k1 to k6 run from now on: their keys are blocked.
	if got := claimKeys("", 6, 0, nil); !slices.Equal(got, []string{"k1", "k2", "k3", "k4", "k5", "k6"}) {
		t.Fatalf("claimed %v, want k1 to k6", got)
	}
	cursor := "unset"
	if got := claimKeys("", 5, 3, &cursor); len(got) != 0 || cursor != "k3" {
		t.Fatalf("first walk of three keys: claimed %v, cursor %q; want none and k3", got, cursor)
	}
	if got := claimKeys(cursor, 5, 3, &cursor); len(got) != 0 || cursor != "k6" {
		t.Fatalf("second walk: claimed %v, cursor %q; want none and k6", got, cursor)
	}
	if got := claimKeys(cursor, 5, 3, &cursor); !slices.Equal(got, []string{"k9"}) {
		t.Fatalf("third walk: claimed %v, want k9, past the blocked keys", got)
	}
	// Without a cursor the walk stays on the first keys.
	ingest(t, q, fanOut("walk", "k8", "t=k8"))
	if got := claimKeys("", 5, 3, nil); len(got) != 0 {
		t.Fatalf("a walk of the first three keys claimed %v", got)
	}
}

// claimByKey claims by order key as p says, with an owner of its own and
// a minute's lease, and fails the test on an error.
func claimByKey(t *testing.T, q QueueStore, p hookbox.ClaimParams) []hookbox.Event {
	t.Helper()
	p.Owner, p.Lease, p.ByKey = fmt.Sprint("bykey-", claimSeq.Add(1)), time.Minute, true
	evs, err := q.Claim(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// testPauseTargets: pauses are kept by name until resumed.
func testPauseTargets(t *testing.T, q QueueStore) {
	ctx := context.Background()
	if err := q.PauseTarget(ctx, "pt/a", "by hand"); err != nil {
		t.Fatal(err)
	}
	if err := q.PauseTarget(ctx, "pt/a", "again"); err != nil {
		t.Fatal(err)
	}
	ps, err := q.Paused(ctx)
	if err != nil || len(ps) != 1 || ps[0].Name != "pt/a" || ps[0].Reason != "by hand" || ps[0].PausedAt.IsZero() {
		t.Fatalf("paused = %+v, %v", ps, err)
	}
	if ok, err := q.ResumeTarget(ctx, "pt/a"); !ok || err != nil {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	if ok, err := q.ResumeTarget(ctx, "pt/a"); ok || err != nil {
		t.Fatalf("second resume = %v, %v; want false", ok, err)
	}
	if ps, err := q.Paused(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("paused after resume = %+v, %v", ps, err)
	}
}

// testClaimSkipsPaused: no claim leases, and no pick locks, an event of a
// paused queue, whatever sources the claimer asks for: the store checks
// the pause in the claim itself, so a worker that could not read the
// pauses (at start, say) still works none of a paused queue's events.
// Once resumed, they are claimed again.
func testClaimSkipsPaused(t *testing.T, q QueueStore) {
	ctx := context.Background()
	ingest(t, q, Delivery("held", "h1"), Delivery("free", "f1"),
		Keyed("keyed", "t", "k1", "a"), Keyed("keyed", "t", "k2", "b"))
	for _, name := range []string{"held", "keyed/t"} {
		if err := q.PauseTarget(ctx, name, "maintenance"); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(evs []hookbox.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.Source+":"+e.DeliveryID)
		}
		return out
	}
	// The pick first, and the claims of one queue before those that would
	// lease its events were the pause not seen.
	w, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: "paused-pick", Limit: 10, Lease: time.Minute, Sources: []string{"held", "keyed/t"}})
	w.Rollback()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("a pick of paused queues locked %v", ids(evs))
	}

	claims := []struct {
		name string
		p    hookbox.ClaimParams
		want []string
	}{
		{"strict", hookbox.ClaimParams{Sources: []string{"held"}, Strict: true}, nil},
		{"by key", hookbox.ClaimParams{Sources: []string{"keyed/t"}, ByKey: true}, nil},
		{"limits per source", hookbox.ClaimParams{Sources: []string{"held", "keyed/t"}, Limits: []int{5, 5}}, nil},
		{"plain", hookbox.ClaimParams{Sources: []string{"held", "free"}}, []string{"free:f1"}},
	}
	for _, c := range claims {
		c.p.Owner, c.p.Limit, c.p.Lease = fmt.Sprint("paused-", claimSeq.Add(1)), 10, time.Minute
		evs, err := q.Claim(ctx, c.p)
		if err != nil {
			t.Fatalf("%s claim: %v", c.name, err)
		}
		if got := ids(evs); !slices.Equal(got, c.want) {
			t.Errorf("%s claim of %v with held and keyed/t paused = %v, want %v", c.name, c.p.Sources, got, c.want)
		}
	}
	for _, name := range []string{"held", "keyed/t"} {
		if _, err := q.ResumeTarget(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(claim(t, q, time.Time{}, 10, "held")); !slices.Equal(got, []string{"held:h1"}) {
		t.Errorf("claim of held once resumed = %v, want h1", got)
	}
	if got := ids(claimByKey(t, q, hookbox.ClaimParams{Limit: 10, Sources: []string{"keyed/t"}})); len(got) != 2 {
		t.Errorf("claim by key of keyed/t once resumed = %v, want k1 and k2", got)
	}
}
