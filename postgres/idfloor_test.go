package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestRestoredIDsNotHandedOutAgain: a database restored from a dump knows
// the id sequence as it was at the dump, and hands the ids given out
// after it to other deliveries; after RaiseIDFloor (hookbox restore-ids)
// the next id is above every id handed out before the restore. The
// restore is played by deleting the rows stored after the "dump" and
// setting the sequence back to its value then, as pg_restore does.
func TestRestoredIDsNotHandedOutAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	store := func(id string) int64 {
		t.Helper()
		rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("rs", id)})
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].ID
	}
	for i := range 5 {
		store(fmt.Sprint("before-", i))
	}
	// A duplicate draws a sequence value too: the dump's sequence is past
	// its largest row.
	store("before-0")
	var dumpedSeq, dumpedMax int64
	if err := conn.QueryRow(ctx, `SELECT last_value FROM events_id_seq`).Scan(&dumpedSeq); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT max(id) FROM event_data`).Scan(&dumpedMax); err != nil {
		t.Fatal(err)
	}
	var handedOut int64
	for i := range 5 {
		handedOut = store(fmt.Sprint("after-", i))
	}
	restore := func() {
		t.Helper()
		for _, q := range []string{`DELETE FROM attempts WHERE event_id > $1`, `DELETE FROM queue WHERE id > $1`,
			`DELETE FROM event_data WHERE id > $1`} {
			if _, err := conn.Exec(ctx, q, dumpedMax); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, `SELECT setval('events_id_seq', $1, true)`, dumpedSeq); err != nil {
			t.Fatal(err)
		}
	}

	// What the step is for: without it, an id is handed out again.
	restore()
	if id := store("post-restore"); id > handedOut {
		t.Fatalf("the restore was not played: the next id %d is past %d", id, handedOut)
	}

	restore()
	f, err := s.RaiseIDFloor(ctx, hookbox.IDFloorParams{Gap: hookbox.DefaultIDGap})
	if err != nil {
		t.Fatal(err)
	}
	if f.Known != dumpedSeq || f.Floor != dumpedSeq+hookbox.DefaultIDGap || !f.Moved {
		t.Errorf("RaiseIDFloor: %+v; the dump's sequence was at %d", f, dumpedSeq)
	}
	if id := store("post-restore"); id <= handedOut {
		t.Fatalf("after the step the next id is %d, handed out before the restore (up to %d)", id, handedOut)
	}
}

// TestFloorOnAFreshSequence: on a database no event was ever stored in,
// the sequence hands out its value itself next (is_called false), so a
// floor equal to it must still move it: --after 1 reported the floor
// moved and the next event got id 1.
func TestFloorOnAFreshSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	res, err := s.RaiseIDFloor(ctx, hookbox.IDFloorParams{After: 1})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("fresh", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].ID <= 1 {
		t.Errorf("after RaiseIDFloor(After: 1) = %+v, the next event got id %d, want above 1", res, rs[0].ID)
	}
}
