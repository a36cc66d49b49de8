package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	msqlite "modernc.org/sqlite"
)

// TestPurgeBatchesDoNotRescanSkippedRows: rows a purge must keep (dead
// events, and done deliveries of a fan-out event that still has one to
// work) pile up at the old end of events_finished, ahead of the done
// events it deletes. The work each batch does under the write lock,
// counted as the pages the writer reads, must not grow with them: the
// same table with those rows behind the done events (past the cutoff)
// is the yardstick. Before, every batch searched from the oldest
// finished row under the lock and read every kept row again. The kept
// rows are passed over on the reader, once a run.
func TestPurgeBatchesDoNotRescanSkippedRows(t *testing.T) {
	const kept, done, batch = 20000, 1000, 100
	ahead, readAhead := purgePageReads(t, kept, done, batch, true)
	behind, readBehind := purgePageReads(t, kept, done, batch, false)
	if len(ahead) < done/batch || len(behind) < done/batch {
		t.Fatalf("batches: %d with the kept rows ahead, %d behind; want at least %d each", len(ahead), len(behind), done/batch)
	}
	t.Logf("pages the writer read per batch: kept rows ahead %v, behind %v", ahead, behind)
	t.Logf("pages the reader read in the run: kept rows ahead %d, behind %d", readAhead, readBehind)
	// The kept rows change nothing but where they sit in the index: the
	// batches should read about as many pages either way.
	if worst, yardstick := slices.Max(ahead), slices.Max(behind); worst > yardstick*3/2 {
		t.Errorf("a batch read %d pages under the write lock with %d kept rows ahead of the done ones, %d with them behind",
			worst, kept, yardstick)
	}
	// A page or so a kept row, read once: not once a batch.
	if extra := readAhead - readBehind; extra > 2*kept {
		t.Errorf("the reader read %d pages more with %d kept rows ahead of the done ones: more than one pass over them", extra, kept)
	}
}

// purgePageReads seeds a store with kept rows the purge must leave
// (dead events and the done deliveries of a fan-out event with one
// delivery pending), older than the done events (ahead) or newer than
// the cutoff (behind), and done events to purge. It purges them in
// batches and returns the pages the writer read in each batch and the
// pages the reader read in the whole run.
func purgePageReads(t *testing.T, kept, done, batch int, ahead bool) (writer []int, reader int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	now := time.Now()
	cutoff := now.Add(-24 * time.Hour)
	keptAt, doneAt := millis(now.Add(-72*time.Hour)), millis(now.Add(-48*time.Hour))
	if !ahead {
		keptAt = millis(now.Add(-time.Hour))
	}
	const insert = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
        INSERT INTO events (source, delivery_id, payload, status, next_attempt_at, created_at, updated_at, fanout, parent_id)
        SELECT ?2, ?2 || i, x'7b7d', ?3, 0, ?4 + i, ?4 + i, ?5, ?6 FROM n`
	err = s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, kept/2, "dead", hookbox.StatusDead, keptAt, false, nil); err != nil {
			return err
		}
		var parent int64
		if err := tx.QueryRowContext(ctx, insert+` RETURNING id`, 1, "fan", hookbox.StatusDone, keptAt, true, nil).Scan(&parent); err != nil {
			return err
		}
		// Its deliveries: all done and old but one, still pending.
		if _, err := tx.ExecContext(ctx, insert, kept-kept/2, "delivery", hookbox.StatusDone, keptAt, false, parent); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, 1, "pending", hookbox.StatusPending, keptAt, false, parent); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, done, "done", hookbox.StatusDone, doneAt, false, nil); err != nil {
			return err
		}
		// A newer event: a purge keeps the newest (keepsNewest).
		_, err := tx.ExecContext(ctx, insert, 1, "newer", hookbox.StatusPending, millis(now), false, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	pageReads(t, s.writer) // from here on
	pageReads(t, s.reader)
	start := time.Now()
	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: cutoff, BatchSize: batch,
		Progress: func(hookbox.PurgeResult) { writer = append(writer, pageReads(t, s.writer)) }})
	if err != nil {
		t.Fatal(err)
	}
	reader = pageReads(t, s.reader)
	t.Logf("kept rows ahead %v: purge of %d done events in %d batches took %v", ahead, done, len(writer), time.Since(start))
	if res != (hookbox.PurgeResult{Done: done}) {
		t.Errorf("purge = %+v, want %d done", res, done)
	}
	var left, leftDone int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE source = 'done') FROM events`).Scan(&left, &leftDone); err != nil {
		t.Fatal(err)
	}
	if want := kept + 3; left != want || leftDone != 0 {
		t.Errorf("after the purge %d events are left (%d of them done events to purge), want the %d kept", left, leftDone, want)
	}
	return writer, reader
}

// pageReads returns the pages the connection of a one-connection pool
// has read, from its cache or the file, since it was last asked.
func pageReads(t *testing.T, db *sql.DB) int {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	err = c.Raw(func(dc any) error {
		for _, op := range []msqlite.DBStatusOp{msqlite.DBStatusCacheHit, msqlite.DBStatusCacheMiss} {
			cur, _, err := dc.(msqlite.DBStatus).Status(op, true)
			if err != nil {
				return err
			}
			n += cur
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWalkFinishedReadsOnFromTheLastRow: each read of a walk over the
// finished rows (Purge, ClearPayloads) is a range of events_finished
// that starts at the row the read before it ended on, not at the oldest
// row; and the re-check under the write lock reads its rows by id.
func TestWalkFinishedReadsOnFromTheLastRow(t *testing.T) {
	s := openTemp(t)
	plan := func(q string, args ...any) string {
		t.Helper()
		return strings.Join(queryPlan(t, s, q, args...), "\n")
	}
	for name, cond := range map[string]string{
		"purge":          purgeable(`('done')`),
		"purge dead":     purgeable(`('done', 'dead')`),
		"clear payloads": clearable,
	} {
		walk := plan(walkFinishedSQL(cond), 1, 2, 3, 4)
		if !strings.HasPrefix(walk, "SEARCH events USING INDEX events_finished (updated_at>? AND updated_at<?)") {
			t.Errorf("%s: a read of the walk is planned as\n%s\nwant a range of events_finished from the last row read", name, walk)
		}
		judge := plan(judgeFinishedSQL(cond, 2), 1, 2, 3)
		if !strings.HasPrefix(judge, "SEARCH events USING INTEGER PRIMARY KEY (rowid=?)") {
			t.Errorf("%s: the re-check under the lock is planned as\n%s\nwant its rows read by id", name, judge)
		}
	}
}
