package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPurgeCostFollowsRowsNotIDs: a purge's cost follows the finished
// rows before its cutoff, not the ids handed out since the oldest row it
// keeps. The batches walked every id from min(id) to max(id), 1000 in a
// transaction, so one dead event kept from long ago (dead events are never
// purged by default) made each hourly purge walk every id since: here 3
// million ids, about 3 s, for a table of four rows and nothing to delete.
func TestPurgeCostFollowsRowsNotIDs(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
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
	start := time.Now()
	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-30 * 24 * time.Hour)})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("purge of a table of 4 rows, ids 1 to %d: %+v in %v", recent[2], res, took)
	if res != (hookbox.PurgeResult{Done: 1}) {
		t.Errorf("purge = %+v, want the one old done event", res)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue`).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d rows left (%v), want the dead one and the two recent", left, err)
	}
	// A generous ceiling: 16 to 52 ms here, 3 to 12 s when it walked the ids.
	if took > time.Second {
		t.Errorf("a purge of 4 rows spread over %d ids took %v", recent[2], took)
	}
}
