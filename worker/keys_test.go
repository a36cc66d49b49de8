package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestKeysPastBlockedOnes: the deliveries of an ordered target whose
// first keys are all held by dead deliveries (more of them than a claim
// visits) still reach the target: each claim that finds only blocked
// keys starts the next one past them (hookbox.ClaimParams.KeyCursor). A
// claim here visits two keys; six are blocked before the one due.
func TestKeysPastBlockedOnes(t *testing.T) {
	ctx := context.Background()
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	keyed := func(id, key string) hookbox.Delivery { return storetest.Keyed("o", "app", id, key) }
	var ds []hookbox.Delivery
	for i := 1; i <= 6; i++ {
		ds = append(ds, keyed(fmt.Sprint("dead-", i), fmt.Sprint("k", i)))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "setup", Limit: 10, Lease: time.Minute, Sources: []string{"o/app"}})
	if err != nil || len(evs) != 6 {
		t.Fatalf("claim: %d, %v", len(evs), err)
	}
	now := time.Now()
	var outs []hookbox.Outcome
	for _, e := range evs {
		outs = append(outs, hookbox.Outcome{ID: e.ID, Owner: "setup", Attempt: e.Attempts, Status: hookbox.StatusDead,
			Error: "dead for the test", StartedAt: now, FinishedAt: now})
	}
	if _, err := s.Finish(ctx, outs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{keyed("due", "k9")}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []string
	p := New(s, Options{PollInterval: 10 * time.Millisecond})
	p.maxKeys = 2
	p.Route("o/app", TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		mu.Lock()
		got = append(got, ev.DeliveryID)
		mu.Unlock()
		return nil
	}))
	p.SetControls("o/app", Controls{ByKey: true})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(stopCtx)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivery of k9, past six keys held by dead deliveries, never reached the target")
		}
		p.Notify()
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "due" {
		t.Errorf("the target got %v, want only the delivery of k9", got)
	}
}

// TestOrderedTargetWorksUnkeyedDeliveries: a target that gained order_by
// holds deliveries stored without an order key: one pending from before,
// one that died before and is replayed while the pool runs, and one that
// another process, still on a config without order_by, stores while it
// runs. Each reaches the target (a claim by key takes only deliveries
// with a key: they would stay pending for ever), and the keyed ones still
// run one per key, in order.
func TestOrderedTargetWorksUnkeyedDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s := dbtest.Open(t, dbURL)
		keyed := func(id, key string) hookbox.Delivery { return storetest.Keyed("u", "app", id, key) }
		ingest := func(ds ...hookbox.Delivery) {
			t.Helper()
			if _, err := s.Ingest(ctx, ds); err != nil {
				t.Fatal(err)
			}
		}
		ingest(keyed("dead", ""))
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "before", Limit: 1, Lease: time.Minute, Sources: []string{"u/app"}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %d, %v", len(evs), err)
		}
		dead := evs[0]
		now := time.Now()
		if _, err := s.Finish(ctx, []hookbox.Outcome{{ID: dead.ID, Owner: "before", Attempt: dead.Attempts, Status: hookbox.StatusDead,
			Error: "dead for the test", StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
		ingest(keyed("old", ""), keyed("k1a", "k1"), keyed("k1b", "k1"), keyed("k2", "k2"))

		var mu sync.Mutex
		var got []string
		running := map[string]int{}
		var overlap []string
		p := New(s, Options{PollInterval: 10 * time.Millisecond, fillKeysEvery: 20 * time.Millisecond})
		p.Route("u/app", TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			got = append(got, ev.DeliveryID)
			if running[ev.OrderKey]++; running[ev.OrderKey] > 1 {
				overlap = append(overlap, ev.DeliveryID)
			}
			mu.Unlock()
			defer func() { mu.Lock(); running[ev.OrderKey]--; mu.Unlock() }()
			return nil
		}))
		p.SetControls("u/app", Controls{ByKey: true})
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Stop(stopCtx)
		}()
		await := func(ids ...string) {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				missing := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(got, id) })
				mu.Unlock()
				if len(missing) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 20s the target has not had %v (it had %v)", missing, got)
				}
				p.Notify()
				time.Sleep(10 * time.Millisecond)
			}
		}
		await("old", "k1a", "k1b", "k2")
		ingest(keyed("late", ""))
		if res, err := s.Replay(ctx, hookbox.ReplayParams{IDs: []int64{dead.ID}}); err != nil || len(res.Replayed) != 1 {
			t.Fatalf("replay: %+v, %v", res, err)
		}
		await("late", "dead")

		mu.Lock()
		defer mu.Unlock()
		if len(got) != 6 || slices.Index(got, "k1a") > slices.Index(got, "k1b") || len(overlap) > 0 {
			t.Errorf("the target got %v (started while another of their key ran: %v); want each once, k1a before k1b, one per key at a time", got, overlap)
		}
	})
}
