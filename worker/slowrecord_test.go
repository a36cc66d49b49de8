package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestSlowRecordRefreshKeepsLeases: pool A runs a delivery past its
// timeout (a target that ignores its ctx, which Policy.Timeout says runs
// on, under leases that "stay extended until the last running handler or
// target returns"). Its pool record's refresh (WorkerSeen) is slow: here
// another transaction holds a lock on the workers table's rows, as a
// migration or an operator's transaction would. A's lease extensions must
// not wait for that refresh: pool B, claiming all along, must never start
// the delivery while A still runs it.
func TestSlowRecordRefreshKeepsLeases(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	ctx := context.Background()

	var mu sync.Mutex
	running, overlaps := 0, 0
	release := make(chan struct{})
	startedA := make(chan struct{})
	var once sync.Once
	target := func(first bool) worker.Target {
		return worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			running++
			if running > 1 {
				overlaps++
			}
			mu.Unlock()
			defer func() { mu.Lock(); running--; mu.Unlock() }()
			if first {
				once.Do(func() { close(startedA) })
				<-release // ignores ctx: runs on past its timeout
			}
			return nil
		})
	}
	// A lease of 2 s, extended every 667 ms.
	pol := worker.Policy{Timeout: time.Second}
	a := worker.New(s, worker.Options{Name: "hostA", PollInterval: 100 * time.Millisecond, StoreTimeout: worker.DefaultStoreTimeout})
	a.Route("plain", target(true))
	a.SetPolicy("plain", pol)
	start(t, a)
	rs := ingest(t, s, storetest.Delivery("plain", "x"))
	a.Notify()
	select {
	case <-startedA:
	case <-time.After(20 * time.Second):
		t.Fatal("A did not start the delivery")
	}

	locker, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	lockTx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockTx.Rollback(ctx)
	if _, err := lockTx.Exec(ctx, `SELECT name FROM workers FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// B's claims do not touch the workers table; its record is a row of
	// its own, which the lock on A's does not hold.
	b := worker.New(s, worker.Options{Name: "hostB", PollInterval: 100 * time.Millisecond, StoreTimeout: worker.DefaultStoreTimeout})
	b.Route("plain", target(false))
	b.SetPolicy("plain", pol)
	start(t, b)

	// While the lock holds A's record refresh, A's lease must still be
	// extended: its end moves past where any lease taken before the lock
	// ends (2 s after it). The lease ran out before, and B ran the
	// delivery beside A.
	watcher, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	var lockedAt time.Time
	if err := watcher.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&lockedAt); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var extended bool
		if err := watcher.QueryRow(ctx, `SELECT status = 'processing' AND next_attempt_at > $1::timestamptz + interval '2.5 seconds' FROM queue WHERE id = $2`,
			lockedAt, rs[0].ID).Scan(&extended); err != nil {
			t.Fatal(err)
		}
		if extended {
			break
		}
		mu.Lock()
		n := overlaps
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			t.Fatalf("A's lease was not extended while its pool record's refresh waited on a lock (%d runs of the delivery by B beside A's)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	lockTx.Rollback(ctx)
	close(release)
	mu.Lock()
	defer mu.Unlock()
	if overlaps > 0 {
		t.Errorf("pool B started the delivery while pool A still ran it (%d overlaps)", overlaps)
	}
}
