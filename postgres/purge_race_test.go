package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestPurgeKeepsDeliveryReplayedWhileItWaits: a purge never deletes a
// FanOut event's delivery that a replay, under way when the purge began,
// has made pending. The event and its delivery are done and older than
// the cutoff; a transaction holds the delivery's queue row and sets it
// pending, as replaySlice does, until the purge waits for that row. Once
// it commits, the purge leaves both the delivery (pending) and its event.
// Without purgeLock the purge's snapshot still saw the delivery done, so
// the event went, and the delete of its deliveries, which waited for the
// row, judged it again by id alone and deleted it.
func TestPurgeKeepsDeliveryReplayedWhileItWaits(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	watch := connect(t, url)
	parent, delivery := seedFanOut(t, s, watch, "pr")

	// A replay of the delivery, not yet committed.
	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	replayIn(t, tx, delivery)
	purged := purgeNothing(s)
	// Wait until the purge waits for the holder's lock, then commit the
	// replay under it.
	awaitBlocked(t, watch, holder, purged)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-purged; err != nil {
		t.Error(err)
	}
	wantKept(t, s, parent, delivery)
}

// replayIn does in tx what a replay does to the event id: it locks the
// event's queue row (replayLock) and makes it pending (replaySet).
func replayIn(t *testing.T, tx pgx.Tx, id int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.Exec(ctx, `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE queue SET status = 'pending', next_attempt_at = now(), updated_at = now()
        WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// wantKept fails t unless the FanOut event parent is there and every
// event of pending is there and pending.
func wantKept(t *testing.T, s *postgres.Store, parent int64, pending ...int64) {
	t.Helper()
	ctx := context.Background()
	for _, id := range pending {
		if e, err := s.Event(ctx, id); err != nil || e.Status != hookbox.StatusPending {
			t.Errorf("replayed event %d after the purge: status %q, %v; want it pending", id, e.Status, err)
		}
	}
	if _, err := s.Event(ctx, parent); err != nil {
		t.Errorf("the FanOut event after the purge: %v; want it kept", err)
	}
}

// seedFanOut stores a FanOut event of source with one delivery, both done
// two days ago, and returns their ids.
func seedFanOut(t *testing.T, s *postgres.Store, conn *pgx.Conn, source string) (parent, delivery int64) {
	t.Helper()
	ctx := context.Background()
	fan := storetest.Delivery(source, "fan")
	fan.FanOut, fan.Routes = true, []hookbox.Route{{Target: "a"}}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{fan})
	if err != nil {
		t.Fatal(err)
	}
	parent = rs[0].ID
	evs := claimAll(t, s, hookbox.QueueName(source, "a"), 1)
	if len(evs) != 1 || evs[0].Parent != parent {
		t.Fatalf("claimed %+v, want the delivery of %d", evs, parent)
	}
	delivery = evs[0].ID
	if errs, err := s.Finish(ctx, []hookbox.Outcome{done(&evs[0])}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET updated_at = now() - interval '2 days' WHERE id = ANY ($1)`,
		[]int64{parent, delivery}); err != nil {
		t.Fatal(err)
	}
	return parent, delivery
}

// awaitBlocked waits until a backend waits for a lock that holder holds,
// failing t if purged reports first.
func awaitBlocked(t *testing.T, watch, holder *pgx.Conn, purged <-chan error) {
	t.Helper()
	for count(t, watch, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`,
		holder.PgConn().PID()) == 0 {
		select {
		case err := <-purged:
			t.Fatalf("the purge ended without waiting for the replay: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// purgeNothing starts a purge of the events done before an hour ago and
// reports on the channel once it has purged nothing (nil) or failed.
func purgeNothing(s *postgres.Store) <-chan error {
	purged := make(chan error, 1)
	go func() {
		res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now().Add(-time.Hour)})
		if err == nil && (res.Done != 0 || res.Dead != 0) {
			err = fmt.Errorf("purged %+v, want nothing", res)
		}
		purged <- err
	}()
	return purged
}

// TestPurgeRunsBatchAgainAfterDeadlock: a purge whose batch deadlocks with
// a replay runs the batch again, rather than failing. A replay of a plain
// event and of a FanOut event's delivery with a larger id locks the two
// in id order; the purge locks the delivery first (purgeLock), then waits
// for the plain event, which the replay holds; the replay then waits for
// the delivery. The server ends the purge's transaction (the replay's
// deadlock_timeout is set longer); the batch, run again, waits for the
// replay to commit and keeps the three events.
func TestPurgeRunsBatchAgainAfterDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	watch := connect(t, url)
	plain := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", storetest.Delivery("pd", "1"))[0]
	parent, delivery := seedFanOut(t, s, watch, "pd")
	if plain > delivery {
		t.Fatalf("plain event %d after the delivery %d", plain, delivery)
	}
	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The replay waits longer than the purge before it looks for a
	// deadlock, so the purge's is the transaction the server ends
	// whichever began to wait first (setting it takes a superuser).
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '1min'`); err != nil {
		t.Skipf("cannot make the purge the deadlock's victim: %v", err)
	}
	replayIn(t, tx, plain)
	purged := purgeNothing(s)
	awaitBlocked(t, watch, holder, purged)
	replayIn(t, tx, delivery) // waits until the server has ended the purge's transaction
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-purged; err != nil {
		t.Error(err)
	}
	wantKept(t, s, parent, plain, delivery)
}
