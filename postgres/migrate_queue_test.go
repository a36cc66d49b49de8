package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateToQueueTable: a database of the schema before the queue table
// (00009), holding events in every state (done at the first attempt, dead,
// leased, pending, waiting for a retry, replayed, with a cleared payload,
// a FanOut event with its deliveries and an order key) and a row an older
// release wrote by itself, migrates to 00010 with every event, its
// status, attempts, lease, error and history as they were, and goes on
// working: dedupe against old rows, new ids after old ones, claims of old
// leases, purges.
func TestMigrateToQueueTable(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)

	var ids []int64
	seed := func(st hookbox.Status, errText, source string) int64 {
		id := storetest.Seed(t, s, st, old, errText, storetest.Delivery(source, source+"-1"))[0]
		ids = append(ids, id)
		return id
	}
	doneID := seed(hookbox.StatusDone, "", "done")
	seed(hookbox.StatusDead, "it broke", "dead")
	leasedID := seed(hookbox.StatusProcessing, "", "leased")
	seed(hookbox.StatusPending, "", "pending")
	retryID := seed(hookbox.StatusPending, "", "retry")
	evs := claimAll(t, s, "retry", 1)
	retry := done(&evs[0])
	retry.Status, retry.RetryAt, retry.Error = hookbox.StatusPending, time.Now().Add(time.Hour), "try later"
	if errs, err := s.Finish(ctx, []hookbox.Outcome{retry}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	replayedID := seed(hookbox.StatusDead, "gave up", "replayed")
	if _, err := s.Replay(ctx, hookbox.ReplayParams{IDs: []int64{replayedID}}); err != nil {
		t.Fatal(err)
	}
	clearedID := seed(hookbox.StatusDone, "", "cleared")
	if n, err := s.ClearPayloads(ctx, time.Now().Add(-time.Hour)); err != nil || n != 2 {
		t.Fatalf("cleared %d payloads, %v; want 2", n, err)
	}
	fan := storetest.Delivery("fan", "fan-1")
	fan.FanOut, fan.Routes = true, []hookbox.Route{{Target: "a", OrderKey: "k1"}, {Target: "b"}}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{fan})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, rs[0].ID)
	children, err := s.Events(ctx, hookbox.Filter{Parent: rs[0].ID})
	if err != nil || len(children) != 2 {
		t.Fatalf("deliveries: %v, %v", children, err)
	}
	for _, c := range children {
		ids = append(ids, c.ID)
	}
	leased := claimAll(t, s, hookbox.QueueName("fan", "a"), 1)
	if len(leased) != 1 || leased[0].OrderKey != "k1" {
		t.Fatalf("claimed delivery: %+v", leased)
	}
	if errs, err := s.Finish(ctx, []hookbox.Outcome{done(&leased[0])}); err != nil || errs[0] != nil {
		t.Fatalf("finish delivery: %v %v", errs, err)
	}

	before := map[int64]hookbox.Event{}
	history := map[int64][]hookbox.Attempt{}
	for _, id := range ids {
		e, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = e
		if history[id], err = s.Attempts(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	stats, err := s.Stats(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Back to 00009 through the migration's Down section: the queue state
	// is back in the events table.
	pgtest.MigrateDownTo(t, url, 9)
	conn := connect(t, url)
	if n := count(t, conn, `SELECT count(*) FROM events WHERE id = $1 AND status = 'done' AND attempts = 1`, doneID); n != 1 {
		t.Fatalf("after migrating down, the done event's row says otherwise (%d rows)", n)
	}
	// A row as the release before wrote it: leased, with no attempts row yet.
	var sqlID int64
	if err := conn.QueryRow(ctx, `INSERT INTO events (source, delivery_id, payload, status, attempts, lease_owner, next_attempt_at)
        VALUES ('sql', 'sql-1', $1, 'processing', 1, 'old-owner', now() + interval '1 minute') RETURNING id`, []byte("{}")).Scan(&sqlID); err != nil {
		t.Fatal(err)
	}

	s = open(t, url) // migrates to 00010
	for _, id := range ids {
		e, err := s.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e, before[id]) {
			t.Errorf("event %d after migrating:\n%+v\nbefore:\n%+v", id, e, before[id])
		}
		h, err := s.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h, history[id]) {
			t.Errorf("attempts of event %d after migrating: %+v, before %+v", id, h, history[id])
		}
	}
	for id, want := range map[int64]func(e hookbox.Event) bool{
		retryID:    func(e hookbox.Event) bool { return e.Status == hookbox.StatusPending && e.LastError == "try later" },
		replayedID: func(e hookbox.Event) bool { return e.Status == hookbox.StatusPending && e.AttemptBase == 1 },
		clearedID:  func(e hookbox.Event) bool { return e.PayloadCleared },
		leasedID:   func(e hookbox.Event) bool { return e.Status == hookbox.StatusProcessing && e.LeaseOwner != "" },
		rs[0].ID:   func(e hookbox.Event) bool { return e.FanOut && e.Status == hookbox.StatusPending },
	} {
		if !want(before[id]) {
			t.Errorf("event %d was not seeded as the test needs: %+v", id, before[id])
		}
	}
	stats.ByStatus[hookbox.StatusProcessing]++ // the older release's row
	got, err := s.Stats(ctx, now)
	if err != nil || !reflect.DeepEqual(got.ByStatus, stats.ByStatus) {
		t.Errorf("stats after migrating: %+v, %v; before %+v", got, err, stats)
	}
	e, err := s.Event(ctx, sqlID)
	if err != nil || e.Status != hookbox.StatusProcessing || e.Attempts != 1 || e.LeaseOwner != "old-owner" || string(e.Payload) != "{}" {
		t.Errorf("the older release's row after migrating: %+v, %v", e, err)
	}
	if n := count(t, conn, `SELECT count(*) FROM queue`); n != len(ids)+1 {
		t.Errorf("%d queue rows, want %d", n, len(ids)+1)
	}

	// Dedupe remembers the old rows; new ids follow the old ones.
	again, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("done", "done-1"), storetest.Delivery("done", "done-2")})
	if err != nil {
		t.Fatal(err)
	}
	if !again[0].Duplicate || again[0].ID != doneID || again[1].Duplicate || again[1].ID <= slices.Max(append(ids, sqlID)) {
		t.Errorf("ingest after migrating: %+v", again)
	}
	// The old leases expire and are claimed again, with the attempt count
	// carried over.
	later := time.Now().Add(2 * time.Hour)
	reclaimed, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute, Now: later,
		Sources: []string{"leased", "sql"}})
	if err != nil || len(reclaimed) != 2 || reclaimed[0].ID != leasedID || reclaimed[1].ID != sqlID ||
		reclaimed[0].Attempts != 2 || reclaimed[1].Attempts != 2 {
		t.Fatalf("claim after migrating: %+v, %v", reclaimed, err)
	}
	for i := range reclaimed {
		if errs, err := s.Finish(ctx, []hookbox.Outcome{done(&reclaimed[i])}); err != nil || errs[0] != nil {
			t.Fatalf("finish after migrating: %v %v", errs, err)
		}
	}
	// Old finished rows are purged, data and queue row alike.
	res, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-time.Hour), IncludeDead: true})
	if err != nil || res.Done != 2 || res.Dead != 1 {
		t.Fatalf("purge after migrating: %+v, %v; want 2 done (one cleared), 1 dead", res, err)
	}
	if _, err := s.Event(ctx, doneID); !errors.Is(err, hookbox.ErrNotFound) {
		t.Errorf("purged event still readable: %v", err)
	}
	if n := count(t, conn, `SELECT (SELECT count(*) FROM queue WHERE id = $1) + (SELECT count(*) FROM event_data WHERE id = $1)`, doneID); n != 0 {
		t.Errorf("%d rows of the purged event left", n)
	}
}

// TestMigrateToQueueTableWhileOlderInstanceIngests: an older hookbox
// (schema 9) goes on ingesting while a newer one migrates, as in the
// rolling upgrade of docs/deploy.md. What it acknowledged (committed) is
// a queued event after 00010, listed and claimable, and a redelivery of it
// is a duplicate of that event; nothing is left in event_data without a
// queue row. A row committed after 00010's copy took its snapshot once
// stayed so: never worked, hidden by the events view, and its dedupe key
// made the redelivery a "duplicate" of nothing visible. The older
// instance's insert is held open until the migration waits for it, and a
// second one arrives while it waits, so both fall where the copy missed
// them whatever the timing.
func TestMigrateToQueueTableWhileOlderInstanceIngests(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	open(t, url).Close()
	pgtest.MigrateDownTo(t, url, 9)
	ctx := context.Background()
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `INSERT INTO events (source, delivery_id, payload, status)
        SELECT 'before', g::text, '\x7b7d', 'done' FROM generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	// What an older instance's ingest writes before it answers 202.
	const oldIngest = `INSERT INTO events (source, delivery_id, payload) VALUES ('live', $1, '\x7b7d')`
	held, err := connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, oldIngest, "held"); err != nil {
		t.Fatal(err)
	}

	type opened struct {
		s   *postgres.Store
		err error
	}
	migrated := make(chan opened, 1)
	go func() {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		migrated <- opened{s, err}
	}()
	// waitLocks returns once n sessions wait for a lock on the table the
	// older release writes.
	waitLocks := func(n int) {
		t.Helper()
		for count(t, conn, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'events'::regclass`) < n {
			select {
			case r := <-migrated:
				if r.s != nil {
					r.s.Close()
				}
				t.Fatalf("the migration ended while the older instance's insert was open: %v", r.err)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitLocks(1) // the migration
	late := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			late <- err
			return
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, oldIngest, "late")
		late <- err
	}()
	waitLocks(2) // and the later insert behind it
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	acked := []string{"held"}
	r := <-migrated
	if r.err != nil {
		t.Fatal(r.err)
	}
	s := r.s
	defer s.Close()
	if err := <-late; err == nil {
		acked = append(acked, "late")
	} else {
		t.Logf("the insert that came during the migration failed (a 503, retried by the sender): %v", err)
	}

	if n := count(t, conn, `SELECT count(*) FROM event_data d WHERE NOT EXISTS (SELECT 1 FROM queue q WHERE q.id = d.id)`); n != 0 {
		t.Errorf("%d event_data rows have no queue row: acknowledged, never worked, not listed", n)
	}
	evs, err := s.Events(ctx, hookbox.Filter{Source: "live"})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, e := range evs {
		listed = append(listed, e.DeliveryID)
	}
	slices.Sort(listed)
	slices.Sort(acked)
	if !slices.Equal(listed, acked) {
		t.Errorf("listed after migrating: %v; acknowledged by the older instance: %v", listed, acked)
	}
	if claimed := claimAll(t, s, "live", 10); len(claimed) != len(acked) {
		t.Errorf("claimed %d events of the older instance, want %d", len(claimed), len(acked))
	}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("live", "held")})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(ctx, rs[0].ID); !rs[0].Duplicate || err != nil || e.DeliveryID != "held" {
		t.Errorf("redelivery after migrating: %+v; its event: %+v, %v", rs[0], e, err)
	}
}

// TestMigrateGivesOrphansQueueRows: 00016 gives each event_data row
// without a queue row (left by 00010 when an older instance's ingest
// committed during its copy) the queue row ingest would have written: a
// FanOut event, one with deliveries, is done and stays unclaimed; any
// other event or delivery is pending, due now, never attempted, listed and
// claimable from its queue. Events that had their queue row keep it as it
// was.
func TestMigrateGivesOrphansQueueRows(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	fan := storetest.Delivery("fan", "fan-1")
	fan.FanOut, fan.Routes = true, []hookbox.Route{{Target: "a"}, {Target: "b"}}
	// A store_only source's events: FanOut, with no deliveries.
	archived, archivedLost := storetest.Delivery("archive", "a-1"), storetest.Delivery("archive", "a-2")
	archived.FanOut, archivedLost.FanOut = true, true
	// A source that was store_only and forwards now: an event of each kind
	// kept, and a forwarded one lost.
	wasStored := storetest.Delivery("changed", "c-1")
	wasStored.FanOut = true
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("plain", "lost"), storetest.Delivery("kept", "kept"), fan, archived, archivedLost,
		wasStored, storetest.Delivery("changed", "c-2"), storetest.Delivery("changed", "c-3")})
	if err != nil {
		t.Fatal(err)
	}
	lostID, keptID, fanID, archivedLostID, changedLostID := rs[0].ID, rs[1].ID, rs[2].ID, rs[4].ID, rs[7].ID
	kept := claimAll(t, s, "kept", 1)
	if len(kept) != 1 {
		t.Fatalf("claimed %d kept events, want 1", len(kept))
	}
	if errs, err := s.Finish(ctx, []hookbox.Outcome{done(&kept[0])}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	children, err := s.Events(ctx, hookbox.Filter{Parent: fanID})
	if err != nil || len(children) != 2 {
		t.Fatalf("deliveries: %v, %v", children, err)
	}
	var childA, childB int64
	for _, c := range children {
		if c.Target == "a" {
			childA = c.ID
		} else {
			childB = c.ID
		}
	}
	s.Close()

	// The rows as 00010 left them, on a database past it: lost, the FanOut
	// event and its delivery to a, and one stored event without queue rows.
	pgtest.MigrateDownTo(t, url, 15)
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `DELETE FROM queue WHERE id = ANY($1)`, []int64{lostID, fanID, childA, archivedLostID, changedLostID}); err != nil {
		t.Fatal(err)
	}
	s = open(t, url) // migrates to 00016

	if n := count(t, conn, `SELECT count(*) FROM event_data d WHERE NOT EXISTS (SELECT 1 FROM queue q WHERE q.id = d.id)`); n != 0 {
		t.Errorf("%d event_data rows still have no queue row", n)
	}
	want := map[int64]func(e hookbox.Event) bool{
		lostID: func(e hookbox.Event) bool {
			return e.Status == hookbox.StatusPending && e.Attempts == 0 && !e.FanOut && !e.NextAttemptAt.After(time.Now())
		},
		keptID: func(e hookbox.Event) bool { return e.Status == hookbox.StatusDone && e.Attempts == 1 },
		fanID:  func(e hookbox.Event) bool { return e.FanOut && e.Attempts == 0 },
		childA: func(e hookbox.Event) bool {
			return e.Status == hookbox.StatusPending && e.Attempts == 0 && e.Parent == fanID
		},
		childB: func(e hookbox.Event) bool { return e.Status == hookbox.StatusPending && e.Parent == fanID },
		// Its source's other event is FanOut: stored, never pending in a
		// queue nothing claims.
		archivedLostID: func(e hookbox.Event) bool { return e.Status == hookbox.StatusStored && e.FanOut },
		// Its source has a FanOut event, from before, and a plain one: in
		// doubt, pending (delivered, never lost).
		changedLostID: func(e hookbox.Event) bool { return e.Status == hookbox.StatusPending && !e.FanOut },
	}
	for id, ok := range want {
		if e, err := s.Event(ctx, id); err != nil || !ok(e) {
			t.Errorf("event %d after migrating: %+v, %v", id, e, err)
		}
	}
	// A FanOut event's status is read from its deliveries' (pending here);
	// its own queue row is done, so it is never claimed.
	if n := count(t, conn, `SELECT count(*) FROM queue WHERE id = $1 AND status = 'done' AND fanout`, fanID); n != 1 {
		t.Errorf("the FanOut event has no queue row done and fanout after migrating")
	}
	if evs, err := s.Events(ctx, hookbox.Filter{Source: "plain"}); err != nil || len(evs) != 1 || evs[0].ID != lostID {
		t.Errorf("plain events listed after migrating: %+v, %v; want event %d", evs, err, lostID)
	}
	if evs, err := s.Events(ctx, hookbox.Filter{Parent: fanID}); err != nil || len(evs) != 2 {
		t.Errorf("deliveries listed after migrating: %+v, %v; want both", evs, err)
	}
	for source, id := range map[string]int64{"plain": lostID, hookbox.QueueName("fan", "a"): childA, "fan": 0, "kept": 0, "archive": 0} {
		claimed := claimAll(t, s, source, 10)
		if id == 0 && len(claimed) != 0 || id != 0 && (len(claimed) != 1 || claimed[0].ID != id) {
			t.Errorf("claimed from %s after migrating: %+v; want event %d", source, claimed, id)
		}
	}
}

// TestReplayWaitsOutPayloadClear: a replay that finds an event locked by
// a payload clearing still in progress waits for it, and then sees the
// payload gone: the event stays done and is reported without its
// payload, never sent back to pending with nothing to run. The check
// runs in a statement taken after the lock (replaySet); checked in the
// snapshot that picked the event, the payload would still look there.
func TestReplayWaitsOutPayloadClear(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	ids := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", storetest.Delivery("rc", "1"))
	// What clearBatch does, held open: the queue row locked, the payload
	// cleared.
	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE event_data SET payload = NULL WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res hookbox.ReplayResult
		err error
	}
	replayed := make(chan result, 1)
	go func() {
		res, err := s.Replay(ctx, hookbox.ReplayParams{IDs: ids, IncludeDone: true})
		replayed <- result{res, err}
	}()
	watch := connect(t, url)
	for count(t, watch, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
        AND (query LIKE 'SELECT id FROM queue WHERE id = ANY%' OR query LIKE 'WITH replayed%')`) == 0 {
		select {
		case r := <-replayed:
			t.Fatalf("the replay ended without waiting for the lock: %+v, %v", r.res, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-replayed
	if r.err != nil || len(r.res.Replayed) != 0 || !slices.Equal(r.res.NoPayload, ids) {
		t.Fatalf("replay = %+v, %v; want nothing replayed, %v without payload", r.res, r.err, ids)
	}
	if e, err := s.Event(ctx, ids[0]); err != nil || e.Status != hookbox.StatusDone || !e.PayloadCleared {
		t.Errorf("event after the replay: %+v, %v; want done, payload cleared", e, err)
	}
}
