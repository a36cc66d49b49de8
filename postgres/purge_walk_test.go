package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPurgeCostFollowsRowsNotIDs: a purge's cost follows the finished
// rows before its cutoff, not the ids handed out since the oldest row it
// keeps. The batches walked every id from min(id) to max(id), 1000 in a
// transaction, so one dead event kept from long ago (dead events are never
// purged by default) made each hourly purge walk every id since: here 3
// million ids, about 3 s, for a table of four rows and nothing to delete.
//
// Counted in the scans the server made of the queue during the purge, not
// timed: the walk over the ids made three scans of the queue for each 1000
// ids (9005 here), whatever the machine's speed.
func TestPurgeCostFollowsRowsNotIDs(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	// One connection: every statement of the purge runs on it, and its
	// statistics can be flushed before they are read (queueScans).
	s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	conn := connect(t, url)
	ingest := func(id string) int64 {
		t.Helper()
		rs, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "src", DeliveryID: id, Payload: []byte(`{}`), ReceivedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].ID
	}
	old := ingest("old-dead")
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'dead', updated_at = now() - interval '300 days' WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	// A year of traffic since, purged: only its ids are gone.
	if _, err := conn.Exec(ctx, `SELECT setval(pg_get_serial_sequence('event_data', 'id'), 3000000)`); err != nil {
		t.Fatal(err)
	}
	var recent []int64
	for _, id := range []string{"a", "b", "c"} {
		recent = append(recent, ingest(id))
	}
	// One of them done and old enough: it is purged, past the gap.
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'done', updated_at = now() - interval '40 days' WHERE id = $1`, recent[0]); err != nil {
		t.Fatal(err)
	}
	scansBefore := queueScans(t, s, conn)
	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-30 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	scans := queueScans(t, s, conn) - scansBefore
	t.Logf("purge of a table of 4 rows, ids 1 to %d: %+v in %d scans of the queue", recent[2], res, scans)
	if res != (hookbox.PurgeResult{Done: 1}) {
		t.Errorf("purge = %+v, want the one old done event", res)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue`).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d rows left (%v), want the dead one and the two recent", left, err)
	}
	// 4 here (one read of the candidates, one batch); 9005
	// when it walked the ids, 1000 to a batch.
	if scans > 10 {
		t.Errorf("a purge of 4 rows spread over %d ids scanned the queue %d times, want a handful", recent[2], scans)
	}
}

// queueScans is the number of scans, sequential and by index, the server
// has counted of the queue table of conn's schema, with everything s's
// one connection and conn have done counted: a session sends its
// statistics only from time to time, but pg_stat_force_next_flush makes it
// send them as the statement's answer goes out.
func queueScans(t *testing.T, s *postgres.Store, conn *pgx.Conn) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	c.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
		WHERE schemaname = current_schema() AND relname = 'queue'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
