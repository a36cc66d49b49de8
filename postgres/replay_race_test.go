package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestReplaySliceRunsAgainAfterDeadlock: a replay whose slice deadlocks
// runs the slice again, rather than failing part way. A transaction
// stands in for a purge batch (whose locks are not all in id order, see
// purgeLock): it holds the queue row of the later of two dead events; the
// replay locks the earlier one and waits for the later; the transaction
// then asks for the earlier one. The server ends the replay's transaction
// (the stand-in's deadlock_timeout is set longer); the slice, run again,
// waits for the stand-in to commit and replays both. Without the retry
// the replay failed with "deadlock detected".
func TestReplaySliceRunsAgainAfterDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	watch := connect(t, url)
	ids := storetest.Seed(t, s, hookbox.StatusDead, time.Now(), "failed", storetest.Delivery("rdl", "1"), storetest.Delivery("rdl", "2"))
	first, second := ids[0], ids[1]
	if first > second {
		first, second = second, first
	}
	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The stand-in waits longer than the replay before it looks for a
	// deadlock, so the replay's is the transaction the server ends
	// (setting it takes a superuser).
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '1min'`); err != nil {
		t.Skipf("cannot make the replay the deadlock's victim: %v", err)
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM queue WHERE id = $1 FOR UPDATE`, second); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res hookbox.ReplayResult
		err error
	}
	replayed := make(chan result, 1)
	go func() {
		res, err := s.Replay(context.Background(), hookbox.ReplayParams{IDs: []int64{first, second}})
		replayed <- result{res, err}
	}()
	// Wait until the replay waits for the stand-in's lock.
	for count(t, watch, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`,
		holder.PgConn().PID()) == 0 {
		select {
		case r := <-replayed:
			t.Fatalf("the replay ended without waiting for the stand-in: %+v, %v", r.res, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Waits until the server has ended the replay's transaction.
	if _, err := tx.Exec(ctx, `SELECT id FROM queue WHERE id = $1 FOR UPDATE`, first); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-replayed
	if r.err != nil || !slices.Equal(r.res.Replayed, []int64{first, second}) || len(r.res.Skipped) != 0 {
		t.Fatalf("replay after losing a deadlock: %+v, %v; want both replayed", r.res, r.err)
	}
	for _, id := range []int64{first, second} {
		if e, err := s.Event(ctx, id); err != nil || e.Status != hookbox.StatusPending {
			t.Errorf("event %d after the replay: %q, %v; want pending", id, e.Status, err)
		}
	}
}
