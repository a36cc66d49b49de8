package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestPausedUnknownAtStart: a pool that cannot read which targets are
// paused when it starts (the read times out: here another transaction
// holds a lock on the pauses' table) claims nothing until it can. It
// kept the set it last read, which at start was empty, and so worked a
// paused target's deliveries until a read succeeded.
func TestPausedUnknownAtStart(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := dbtest.Open(t, dbURL)
	ctx := context.Background()
	if err := s.PauseTarget(ctx, "held", "maintenance"); err != nil {
		t.Fatal(err)
	}
	rs := ingest(t, s, storetest.Delivery("held", "h1"), storetest.Delivery("free", "f1"))

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
	if _, err := lockTx.Exec(ctx, `LOCK TABLE paused_targets IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var table uint32
	if err := lockTx.QueryRow(ctx, `SELECT 'paused_targets'::regclass::oid`).Scan(&table); err != nil {
		t.Fatal(err)
	}

	var ran atomic.Int64
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	for _, q := range []string{"held", "free"} {
		p.Route(q, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			ran.Add(1)
			return nil
		}))
	}
	start(t, p)

	// Two reads of the pauses wait on the lock, one after the other: the
	// first has failed (its second's timeout), and the claim round that
	// followed it has ended.
	watcher, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	reads := map[time.Time]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(reads) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads of the pauses waited on the lock in 20 s, want 2", len(reads))
		}
		rows, err := watcher.Query(ctx, `SELECT a.query_start FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
            WHERE NOT l.granted AND l.relation = $1`, table)
		if err != nil {
			t.Fatal(err)
		}
		starts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range starts {
			reads[at] = true
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := lockTx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The unpaused target's delivery runs once the pauses are read; by
	// then the paused one's, had it been claimed while they were not
	// known, would have been claimed long before.
	awaitDone(t, s, rs[1].ID, 20*time.Second)
	ev, err := s.Event(ctx, rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != hookbox.StatusPending || ev.Attempts != 0 {
		t.Errorf("the paused target's event is %s after %d attempts while the pauses could not be read at start, want pending and unattempted", ev.Status, ev.Attempts)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("%d deliveries ran, want the unpaused target's one", n)
	}
}
