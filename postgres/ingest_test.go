package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// poison makes the server refuse, with a data error, every row whose
// delivery id starts with "poison": a stand-in for the values PostgreSQL
// refuses that no check before the INSERT foresees (an index row too
// large, an untranslatable character).
const poison = `
CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.delivery_id LIKE 'poison%' THEN
        RAISE EXCEPTION 'index row size exceeds maximum' USING ERRCODE = '54000';
    END IF;
    IF NEW.delivery_id LIKE 'badbyte%' THEN
        RAISE EXCEPTION 'invalid byte sequence' USING ERRCODE = '22021';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER poison BEFORE INSERT ON event_data FOR EACH ROW EXECUTE FUNCTION poison();`

// TestDataErrorFailsOnlyItsDelivery: a delivery the server refuses with a
// data error no longer fails the transaction it shares (issue 13 item 6):
// it alone gets ErrBadDelivery, the deliveries sent with it are stored,
// and so are the earlier batches of the same ingest transaction.
func TestDataErrorFailsOnlyItsDelivery(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	if _, err := connect(t, url).Exec(context.Background(), poison); err != nil {
		t.Fatal(err)
	}
	var ds []hookbox.Delivery
	for i := range 100 {
		ds = append(ds, storetest.Delivery("p", fmt.Sprint("good-", i)))
	}
	ds[30] = storetest.Delivery("p", "poison-1")
	ds[31] = storetest.Delivery("p", "poison-1") // a repeat of the culprit
	ds[77] = storetest.Delivery("p", "badbyte-1")
	rs, err := storetest.IngestRetried(t, s, ds) // a loaded machine may outlast an ingest step's bound
	wantBad(t, err, rs, 30, 31, 77)
	if n := countRows(t, s, "p"); n != 97 {
		t.Errorf("%d rows, want the 97 good ones", n)
	}

	// In an ingest transaction: the culprit is in the second batch.
	ctx := context.Background()
	b, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Add(ctx, []hookbox.Delivery{storetest.Delivery("q", "a"), storetest.Delivery("q", "b")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Add(ctx, []hookbox.Delivery{storetest.Delivery("q", "c"), storetest.Delivery("q", "poison-2"), storetest.Delivery("q", "a")})
	wantBad(t, err, second, 1)
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "q"); n != 3 {
		t.Errorf("%d rows, want a, b and c", n)
	}
	if first[0].ID == 0 || first[1].ID == 0 || second[0].ID == 0 || !second[2].Duplicate || second[2].ID != first[0].ID {
		t.Errorf("receipts after the redo: %+v %+v", first, second)
	}
	e, err := s.Event(ctx, first[0].ID)
	if err != nil || e.DeliveryID != "a" {
		t.Errorf("receipt of a names event %d: %+v, %v", first[0].ID, e, err)
	}
}

// TestRedoStoresAsOneAtATime: the rounds that keep a batch's outcome that
// of its deliveries one at a time (hookbox.InsertInOrder) hold on the
// paths a data error takes too. A redo replays the earlier Adds of the
// transaction as one batch: Adds that each stored their delivery new must
// keep it new, though merged they hold a repeat of a duplicate under
// another body. The Add that failed is then isolated, whose repeats are
// decided the same way.
func TestRedoStoresAsOneAtATime(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	if _, err := connect(t, url).Exec(ctx, poison); err != nil {
		t.Fatal(err)
	}
	keyed := func(id, body string) hookbox.Delivery {
		d := storetest.Delivery("r", id)
		d.Payload = []byte(body)
		sum := sha256.Sum256(d.Payload)
		d.BodySHA256 = sum[:]
		return d
	}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{keyed("a", `{"n":"x"}`), keyed("e", `{"n":"v"}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, e := rs[0].ID, rs[1].ID
	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	var got [][]hookbox.Receipt
	for _, d := range []hookbox.Delivery{
		keyed("a", `{"n":"y"}`), // a duplicate of a by its id: body y stays free
		keyed("c", `{"n":"y"}`), // new
		keyed("b", `{"n":"x"}`), // a duplicate of a by its body: id b stays free
		keyed("b", `{"n":"z"}`), // new
	} {
		rs, err := tx.Add(ctx, []hookbox.Delivery{d})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rs)
	}
	last, err := tx.Add(ctx, []hookbox.Delivery{
		keyed("e", `{"n":"w"}`), // a duplicate of e by its id
		keyed("f", `{"n":"w"}`), // new
		storetest.Delivery("r", "poison-3"),
		keyed("g", `{"n":"v"}`), // a duplicate of e by its body
		keyed("g", `{"n":"u"}`), // new
	})
	wantBad(t, err, last, 2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		dup bool
		of  int64
	}{{true, a}, {false, 0}, {true, a}, {false, 0}} {
		if r := got[i][0]; r.Duplicate != want.dup || want.dup && r.ID != want.of {
			t.Errorf("Add %d after the redo = %+v, want duplicate %v (of %d)", i, r, want.dup, want.of)
		}
	}
	if !last[0].Duplicate || last[0].ID != e || last[1].Duplicate || !last[3].Duplicate || last[3].ID != e || last[4].Duplicate {
		t.Errorf("isolated Add = %+v, want duplicate of %d, new, refused, duplicate of %d, new", last, e, e)
	}
	if n := countRows(t, s, "r"); n != 6 {
		t.Errorf("%d rows, want a, e, c, b, f and g", n)
	}
}

// wantBad checks that err names exactly the deliveries bad, and that every
// other receipt names a row.
func wantBad(t *testing.T, err error, rs []hookbox.Receipt, bad ...int) {
	t.Helper()
	var bd *hookbox.BadDeliveries
	if !errors.As(err, &bd) || errors.Is(err, hookbox.ErrUnavailable) {
		t.Fatalf("error = %v, want BadDeliveries and not ErrUnavailable", err)
	}
	isBad := map[int]bool{}
	for _, i := range bad {
		isBad[i] = true
	}
	for i := range rs {
		if got := bd.ItemError(i) != nil; got != isBad[i] {
			t.Errorf("delivery %d: bad = %v, want %v", i, got, isBad[i])
		}
		if !isBad[i] && rs[i].ID == 0 {
			t.Errorf("delivery %d has no receipt", i)
		}
	}
}

func countRows(t *testing.T, s interface {
	Events(context.Context, hookbox.Filter) ([]hookbox.Event, error)
}, source string) int {
	t.Helper()
	es, err := s.Events(context.Background(), hookbox.Filter{Source: source, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestIngestCommitsSynchronously: with the session default of
// synchronous_commit off (set on the connection by the URL), ingest still
// commits synchronously (issue 13 item 13). A trigger records the setting
// in force inside each ingest transaction.
func TestIngestCommitsSynchronously(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	conn := connect(t, url)
	open(t, url) // migrate
	if _, err := conn.Exec(context.Background(), `
CREATE TABLE seen (setting text);
CREATE FUNCTION record_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seen VALUES (current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER record_sync BEFORE INSERT ON event_data FOR EACH ROW EXECUTE FUNCTION record_sync();`); err != nil {
		t.Fatal(err)
	}
	s := open(t, url+"&synchronous_commit=off")
	ctx := context.Background()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(ctx, []hookbox.Delivery{storetest.Delivery("s", "2")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT setting FROM seen`)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := pgxCollectStrings(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) != 2 {
		t.Fatalf("recorded %v, want 2 settings", settings)
	}
	for _, v := range settings {
		if v != "on" {
			t.Errorf("synchronous_commit inside ingest = %q, want on", v)
		}
	}
}

// pgxCollectStrings reads one text column.
func pgxCollectStrings(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// TestMigrateKeepsRows: a database made with the schema of the last
// release (00002), holding events, migrates to the current one with its
// rows intact; they keep no body hash and an attempt base of 0, and ingest
// dedupes by body from then on.
func TestMigrateKeepsRows(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("m", "1"), storetest.Delivery("m", "2")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := connect(t, url)
	// Back to the schema of 00002, rows kept: by the migrations' own Down
	// sections to 00009, then by hand.
	pgtest.MigrateDownTo(t, url, 9)
	if _, err := conn.Exec(ctx, `ALTER TABLE attempts ADD CONSTRAINT attempts_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;
DROP TABLE rejected_deliveries; DROP TABLE paused_targets; ALTER TABLE events DROP COLUMN order_key, DROP COLUMN fanout, DROP COLUMN parent_id;
DROP TABLE work_marks; DROP TABLE workers; ALTER TABLE events DROP COLUMN attempt_base;
DROP INDEX events_body; ALTER TABLE events DROP COLUMN body_sha256;
DELETE FROM goose_db_version WHERE version_id >= 3`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO events (source, delivery_id, payload) VALUES ('m', 'old', '\x7b7d')`); err != nil {
		t.Fatal(err)
	}
	s = open(t, url)
	if n := countRows(t, s, "m"); n != 3 {
		t.Fatalf("%d rows after migrating, want 3", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_constraint WHERE contype = 'f'
        AND conrelid IN ('attempts'::regclass, 'events'::regclass)`); n != 0 {
		t.Errorf("%d foreign keys left on attempts and events after 00009, want none", n)
	}
	e, err := s.Event(ctx, rs[1].ID)
	if err != nil || e.DeliveryID != "2" || string(e.Payload) != `{"id":"2"}` || e.AttemptBase != 0 {
		t.Errorf("event after migrating: %+v, %v", e, err)
	}
	var nulls int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE body_sha256 IS NULL`).Scan(&nulls); err != nil || nulls != 3 {
		t.Errorf("rows without a body hash = %d, %v; want 3", nulls, err)
	}
	d := storetest.Delivery("m", "new")
	d.BodySHA256 = []byte("0123456789abcdef0123456789abcdef")
	again := d
	again.DeliveryID = "new-id"
	got, err := s.Ingest(ctx, []hookbox.Delivery{d})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := s.Ingest(ctx, []hookbox.Delivery{again})
	if err != nil || !dup[0].Duplicate || dup[0].ID != got[0].ID {
		t.Errorf("same body under a new id after migrating: %+v, %v", dup, err)
	}
}

// TestMigrateFillsGap: a schema that has a later migration but lacks an
// earlier one (migrations written on parallel branches, merged in the
// other order) counts as not migrated for commands that only open it, and
// opening it to migrate applies the missing one.
func TestMigrateFillsGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	open(t, url).Close()
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `DROP TABLE work_marks; ALTER TABLE workers DROP COLUMN pid; ALTER TABLE workers DROP COLUMN host;
DELETE FROM goose_db_version WHERE version_id = 6`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, url, postgres.Options{Existing: true}); !errors.Is(err, hookbox.ErrNoSchema) {
		t.Fatalf("opening a schema with a gap: %v, want ErrNoSchema", err)
	}
	open(t, url).Close()
	s, err := postgres.Open(ctx, url, postgres.Options{Existing: true})
	if err != nil {
		t.Fatalf("after filling the gap: %v", err)
	}
	s.Close()
	if n := count(t, conn, `SELECT count(*) FROM goose_db_version WHERE version_id = 6 AND is_applied`); n != 1 {
		t.Errorf("version 6 recorded %d times", n)
	}
}

// TestPurgeTakesAttemptsRecordedWhileItWaits: an attempt recorded for an
// event while a purge waits for the event's lock (a finish refusing a
// stale outcome records a "lost" attempt) goes with the event. There is
// no foreign key to cascade (00009): the purge deletes the attempts in a
// statement of its own, whose snapshot sees that row.
func TestPurgeTakesAttemptsRecordedWhileItWaits(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	ids := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", storetest.Delivery("pw", "1"))
	holder := connect(t, url)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO attempts (event_id, attempt, owner, outcome, started_at, finished_at)
        VALUES ($1, 1, 'stale', 'lost', now(), now())`, ids[0]); err != nil {
		t.Fatal(err)
	}
	purged := make(chan error, 1)
	go func() {
		res, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-time.Hour)})
		if err == nil && res.Done != 1 {
			err = fmt.Errorf("purged %+v, want 1 done", res)
		}
		purged <- err
	}()
	// Wait until the purge waits for the row lock, then let the attempt
	// commit under it.
	watch := connect(t, url)
	for count(t, watch, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM queue%'`) == 0 {
		select {
		case err := <-purged:
			t.Fatalf("the purge ended without waiting for the lock: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-purged; err != nil {
		t.Fatal(err)
	}
	if n := count(t, watch, `SELECT count(*) FROM attempts WHERE event_id = $1`, ids[0]); n != 0 {
		t.Errorf("%d attempts of the purged event left", n)
	}
}
