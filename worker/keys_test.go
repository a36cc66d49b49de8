package worker

import (
	"context"
	"fmt"
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
