package sqlite

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// replayFilters are bulk replays whose events are few among many others
// that no index leads past: a status filter (compared, before, as the
// status an operator reads, which no index holds), an event type, a
// delivery id without its source, a time window, and a source with a
// status.
var replayFilters = map[string]hookbox.Filter{
	"status dead":            {Status: hookbox.StatusDead},
	"event type":             {EventType: "wanted"},
	"delivery id":            {DeliveryID: "wanted-1"},
	"time window":            {Since: time.UnixMilli(5_000_000), Until: time.UnixMilli(5_000_100)},
	"source and status dead": {Source: "s", Status: hookbox.StatusDead},
}

// seedReplay stores others done events of source s, event type push,
// created at 1,000,000 ms on, then three dead events of source s, event
// type wanted, delivery ids wanted-1 to wanted-3, created at 5,000,000 ms
// on; every one with a payload of 400 bytes. It returns the dead ones'
// ids.
func seedReplay(t *testing.T, s *Store, others int) []int64 {
	t.Helper()
	ctx := context.Background()
	const insert = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
        INSERT INTO events (source, delivery_id, event_type, payload, status, attempts, next_attempt_at, created_at, updated_at)
        SELECT 's', ?2 || '-' || i, ?2, randomblob(400), ?3, 1, ?4 + i, ?4 + i, ?4 + i FROM n`
	var dead []int64
	err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, others, "push", hookbox.StatusDone, 1_000_000); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, insert+` RETURNING id`, 3, "wanted", hookbox.StatusDead, 5_000_000)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			dead = append(dead, id)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dead)
	return dead
}

// TestReplayWriteTransactionsReadOnlyTheirSlice: a bulk replay finds its
// events on a reader and, under the write lock, reads only the events it
// found, by id. So the pages the writer reads in one of its transactions
// do not grow with the events the filter passes over: 12,000 done events
// ahead of three dead ones cost a transaction about what 1,000 do, for
// every filter. Before, each transaction searched for its events itself,
// along every row of the table (no index serves those filters, and the
// status was compared as statusSummary, which events_dead cannot serve):
// ingest waited for the whole scan, 8 s at 10 million rows.
func TestReplayWriteTransactionsReadOnlyTheirSlice(t *testing.T) {
	for name, f := range replayFilters {
		t.Run(name, func(t *testing.T) {
			few := replayWriterPages(t, f, 1_000)
			many := replayWriterPages(t, f, 12_000)
			t.Logf("pages the writer read in a replay transaction: %d behind 1,000 other events, %d behind 12,000", few, many)
			// Twelve times the rows to pass over: as many pages under the
			// lock, give or take a level of the b-trees (a search of the
			// table read about 1,500 here).
			if many > 2*few+20 {
				t.Errorf("a replay transaction read %d pages under the write lock behind 12,000 other events, %d behind 1,000", many, few)
			}
		})
	}
}

// replayWriterPages seeds a new store with others events the replay by f
// passes over and three it replays, replays them, and returns the most
// pages the writer read in one of the replay's transactions.
func replayWriterPages(t *testing.T, f hookbox.Filter, others int) int {
	t.Helper()
	ctx := context.Background()
	s := openTemp(t)
	dead := seedReplay(t, s, others)
	want := dead
	if f.DeliveryID != "" {
		want = dead[:1]
	}
	pageReads(t, s.writer) // from here on
	worst := 0
	res, err := s.Replay(ctx, hookbox.ReplayParams{Filter: f,
		Progress: func(int) { worst = max(worst, pageReads(t, s.writer)) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replayed, want) || len(res.NoPayload) != 0 || len(res.Skipped) != 0 {
		t.Fatalf("replay = %+v, want %v replayed", res, want)
	}
	return worst
}

// TestReplayPlans: a replay reads its events on a reader through the
// index that serves its filter (events_dead for the dead ones), and the
// write transaction reads each event it judges again by its id, whatever
// the filter's terms.
func TestReplayPlans(t *testing.T) {
	s := openTemp(t)
	plan := func(q string, args ...any) string {
		t.Helper()
		return strings.Join(queryPlan(t, s, q, args...), "\n")
	}
	where, args := replayWhere(hookbox.ReplayParams{Filter: hookbox.Filter{Status: hookbox.StatusDead}})
	pick := plan(`SELECT id FROM events`+where+` AND payload IS NOT NULL AND id > ? ORDER BY id LIMIT ?`, append(args, 0, 10)...)
	if pick != "SEARCH events USING INDEX events_dead (id>?)" {
		t.Errorf("the search for dead events to replay is planned as\n%s\nwant a range of events_dead", pick)
	}
	params := []hookbox.ReplayParams{{IDs: []int64{1, 2}}, {IncludeDone: true}}
	for _, f := range replayFilters {
		params = append(params, hookbox.ReplayParams{Filter: f})
	}
	for _, p := range params {
		where, args := replayWhere(p)
		judge := plan(replayJudgeSQL(where, 3), append(args, 1, 2, 3)...)
		// Named ids come as a JSON array (idList), read once into a list:
		// only those lines beside the rows read by id.
		var lines []string
		for _, l := range strings.Split(judge, "\n") {
			if l != "LIST SUBQUERY 1" && l != "LIST SUBQUERY 2" && l != "SCAN json_each VIRTUAL TABLE INDEX 1:" && l != "CREATE BLOOM FILTER" {
				lines = append(lines, l)
			}
		}
		if strings.Join(lines, "\n") != "SEARCH events USING INTEGER PRIMARY KEY (rowid=?)" {
			t.Errorf("%+v: the re-check under the write lock is planned as\n%s\nwant its rows read by id", p, judge)
		}
	}
	// The update that sets each event's paced due time reads the pairs
	// once and each row by id, never the table.
	if update := plan(replayUpdate, 1, jsonNumbers([][2]int64{{1, 1}, {2, 2}})); update !=
		"SCAN json_each VIRTUAL TABLE INDEX 1:\nSEARCH events USING INTEGER PRIMARY KEY (rowid=?)" {
		t.Errorf("the replay's update is planned as\n%s\nwant the pairs scanned and each row read by id", update)
	}
}

// TestReplayJudgesAgainUnderTheLock: a replay finds its events on a
// reader and replays them once the writer is its own; an event that
// changed meanwhile is judged on what it is now. Here one was claimed
// (processing), one lost its payload to retention and one no longer
// matches the filter's event type: only the fourth, still dead, is
// replayed, and the one whose payload went is reported in NoPayload.
func TestReplayJudgesAgainUnderTheLock(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	dead := seedReplay(t, s, 10)
	var fourth int64
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO events (source, delivery_id, event_type, payload, status, attempts,
            next_attempt_at, created_at, updated_at) VALUES ('s', 'wanted-4', 'wanted', x'7b7d', 'dead', 1, 1, 1, 1)
            RETURNING id`).Scan(&fourth)
	}); err != nil {
		t.Fatal(err)
	}

	// Hold the writer while the replay reads; in the same transaction,
	// change three of its events as a worker, retention and an operator
	// could have meanwhile.
	var waits int64
	held, release, holdDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holdDone <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			waits = s.writer.Stats().WaitCount
			close(held)
			<-release
			for i, q := range []string{
				`UPDATE events SET status = 'processing', lease_owner = 'w' WHERE id = ?`,
				`UPDATE events SET payload = NULL WHERE id = ?`,
				`UPDATE events SET event_type = 'other' WHERE id = ?`,
			} {
				if _, err := tx.ExecContext(ctx, q, dead[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	<-held
	type result struct {
		res hookbox.ReplayResult
		err error
	}
	replayed := make(chan result, 1)
	go func() {
		res, err := s.Replay(ctx, hookbox.ReplayParams{Filter: hookbox.Filter{EventType: "wanted", Status: hookbox.StatusDead}})
		replayed <- result{res, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); s.writer.Stats().WaitCount == waits; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replay never waited for the writer")
		}
	}
	close(release)
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}
	r := <-replayed
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(r.res.Replayed, []int64{fourth}) || !slices.Equal(r.res.NoPayload, dead[1:2]) {
		t.Errorf("replay = %+v, want %d replayed and %d without its payload", r.res, fourth, dead[1])
	}
	for i, want := range []hookbox.Status{hookbox.StatusProcessing, hookbox.StatusDead, hookbox.StatusDead} {
		if e, err := s.Event(ctx, dead[i]); err != nil || e.Status != want {
			t.Errorf("event %d changed under the replay: %s, %v; want it left %s", dead[i], e.Status, err, want)
		}
	}
}
