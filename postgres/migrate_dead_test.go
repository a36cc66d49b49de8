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

// TestMigrateBuildsDeadIndex: a database of schema version 17, holding
// events, migrates to 00018 with every row kept, and its dead rows are
// counted and listed from the new index (queue_dead), valid.
func TestMigrateBuildsDeadIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	conn := seededAt(t, url, 17, twenty())
	if n := count(t, conn, `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'queue_dead'`); n != 0 {
		t.Fatalf("queue_dead is still there at version 17")
	}
	// Rows as version 17 writes them: some dead, some done.
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'dead' WHERE id % 4 = 0;
        UPDATE queue SET status = 'done' WHERE id % 4 = 1`); err != nil {
		t.Fatal(err)
	}
	s := open(t, url) // migrates to 00018
	if !indexValid(t, conn, "queue_dead") {
		t.Errorf("queue_dead is not valid after migrating")
	}
	if n := count(t, conn, `SELECT count(*) FROM queue`); n != 20 {
		t.Errorf("%d queue rows after migrating, want 20", n)
	}
	ov, err := s.Overview(ctx, time.Now())
	if err != nil || len(ov) != 1 || ov[0].ByStatus[hookbox.StatusDead] != 5 || ov[0].ByStatus[hookbox.StatusPending] != 10 {
		t.Errorf("overview after migrating: %+v, %v; want m: 5 dead, 10 pending", ov, err)
	}
	dead, err := s.Events(ctx, hookbox.Filter{Status: hookbox.StatusDead})
	if err != nil || len(dead) != 5 {
		t.Errorf("dead events listed after migrating: %d, %v; want 5", len(dead), err)
	}
}

// TestMigrateBuildsCreatedRanges: a database of schema version 18,
// holding events, migrates to 00019 with every row kept, and its
// event_data_created index (received times by runs of pages) is valid
// and lists by time what a walk lists.
func TestMigrateBuildsCreatedRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	old := time.Now().Add(-time.Hour)
	ds := twenty()
	for i := range 15 {
		ds[i].ReceivedAt = old
	}
	conn := seededAt(t, url, 18, ds)
	if n := count(t, conn, `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'event_data_created'`); n != 0 {
		t.Fatalf("event_data_created is still there at version 18")
	}
	s := open(t, url) // migrates to 00019
	if !indexValid(t, conn, "event_data_created") {
		t.Errorf("event_data_created is not valid after migrating")
	}
	if n := count(t, conn, `SELECT count(*) FROM event_data`); n != 20 {
		t.Errorf("%d events after migrating, want 20", n)
	}
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET enable_indexscan = off`); err != nil {
		t.Fatal(err)
	}
	// Through the index alone (no walk of the ids, no scan of the table).
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM event_data WHERE created_at >= $1`, old.Add(time.Minute)).Scan(&n); err != nil || n != 5 {
		t.Errorf("events received in the last hour, through event_data_created: %d, %v; want 5", n, err)
	}
	recent, err := s.Events(ctx, hookbox.Filter{Since: old.Add(time.Minute)})
	if err != nil || len(recent) != 5 {
		t.Errorf("events listed since an hour ago after migrating: %d, %v; want 5", len(recent), err)
	}
}

// TestMigrateKeepsCreatedRangesBuiltBefore: an operator who builds
// event_data_created with CREATE INDEX CONCURRENTLY before upgrading
// from version 18 (docs/deploy.md: nothing held back) has it kept and
// version 19 recorded; one whose concurrent build was cancelled, which
// leaves an invalid index of that name, has it built again. Before, the
// migration failed on either with "relation already exists", and every
// serve start with it.
func TestMigrateKeepsCreatedRangesBuiltBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		cancelled bool
	}{{"built", false}, {"cancelled", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.URL(t)
			conn := seededAt(t, url, 18, twenty())
			const build = `CREATE INDEX CONCURRENTLY event_data_created ON event_data USING brin (created_at) WITH (autosummarize = on)`
			if c.cancelled {
				// A writer's open transaction makes the concurrent build
				// wait, after it has made the index, until its lock_timeout.
				writer := connect(t, url)
				if _, err := writer.Exec(ctx, `BEGIN; LOCK TABLE event_data IN ROW EXCLUSIVE MODE`); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Exec(ctx, `SET lock_timeout = '200ms'`); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Exec(ctx, build); err == nil {
					t.Fatal("the concurrent build was not cancelled")
				}
				if _, err := writer.Exec(ctx, `ROLLBACK`); err != nil {
					t.Fatal(err)
				}
				if n := count(t, conn, `SELECT count(*) FROM pg_index WHERE indexrelid = 'event_data_created'::regclass AND NOT indisvalid`); n != 1 {
					t.Fatalf("the cancelled build left no invalid index")
				}
			} else if _, err := conn.Exec(ctx, build); err != nil {
				t.Fatal(err)
			}
			s, err := postgres.Open(ctx, url, postgres.Options{}) // migrates to 00019
			if err != nil {
				t.Fatalf("migrating with event_data_created built before: %v", err)
			}
			s.Close()
			if !indexValid(t, conn, "event_data_created") {
				t.Errorf("event_data_created is not valid after migrating")
			}
			if n := count(t, conn, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`); n != 19 {
				t.Errorf("schema at version %d after migrating, want 19", n)
			}
			if n := count(t, conn, `SELECT count(*) FROM event_data`); n != 20 {
				t.Errorf("%d events after migrating, want 20", n)
			}
		})
	}
}

// seededAt stores ds in a fresh schema at url, brings the schema down to
// version, and returns a connection to it: a database an older hookbox
// made, with its rows, for a test of the migrations after version.
func seededAt(t *testing.T, url string, version int64, ds []hookbox.Delivery) *pgx.Conn {
	t.Helper()
	s := open(t, url)
	if _, err := s.Ingest(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgtest.MigrateDownTo(t, url, version)
	return connect(t, url)
}

// indexValid reports whether the index name of the schema is valid and
// ready, as a build that finished leaves it.
func indexValid(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	return count(t, conn, `SELECT count(*) FROM pg_index WHERE indexrelid = '`+name+`'::regclass AND indisvalid AND indisready`) == 1
}

// twenty is 20 deliveries of source m, d0 to d19.
func twenty() []hookbox.Delivery {
	var ds []hookbox.Delivery
	for i := range 20 {
		ds = append(ds, storetest.Delivery("m", fmt.Sprint("d", i)))
	}
	return ds
}
