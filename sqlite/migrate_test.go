package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateKeepsRows: a database made with the schema of the last
// release (00002), holding events, migrates to the current one with its
// rows intact; they keep no body hash and an attempt base of 0, and ingest
// dedupes by body from then on.
func TestMigrateKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("m", "1"), storetest.Delivery("m", "2")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Back to the schema of 00002, rows kept, and one more row written
	// with that schema.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX events_dead_keys`,
		`DROP TABLE sessions`,
		`DROP INDEX events_fanout`,
		`DROP INDEX events_dead`,
		`DROP TABLE nonces`,
		`DROP TABLE rejected_deliveries`,
		`DROP TABLE paused_targets`,
		`DROP INDEX events_leased_keys`,
		`DROP INDEX events_order`,
		`DROP INDEX events_children`,
		`ALTER TABLE events DROP COLUMN order_key`,
		`ALTER TABLE events DROP COLUMN fanout`,
		`ALTER TABLE events DROP COLUMN parent_id`,
		`DROP TABLE workers`,
		`ALTER TABLE events DROP COLUMN attempt_base`,
		`DROP INDEX events_body`,
		`ALTER TABLE events DROP COLUMN body_sha256`,
		`DELETE FROM goose_db_version WHERE version_id >= 3`,
		`INSERT INTO events (source, delivery_id, payload, next_attempt_at, created_at, updated_at) VALUES ('m', 'old', x'7b7d', 0, 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	es, err := s.Events(ctx, hookbox.Filter{Source: "m"})
	if err != nil || len(es) != 3 {
		t.Fatalf("after migrating: %d events, %v; want 3", len(es), err)
	}
	e, err := s.Event(ctx, rs[1].ID)
	if err != nil || e.DeliveryID != "2" || string(e.Payload) != `{"id":"2"}` || e.AttemptBase != 0 {
		t.Errorf("event after migrating: %+v, %v", e, err)
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

// TestMigrateFillsGap: a database that has a later migration but lacks an
// earlier one (migrations written on parallel branches, 00007 and 00008,
// merged in the other order) counts as not migrated for commands that
// only open it, and opening it to migrate applies the missing one.
func TestMigrateFillsGap(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Undo 00006 only: the later migrations stay applied.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE workers DROP COLUMN pid`,
		`ALTER TABLE workers DROP COLUMN host`,
		`DELETE FROM goose_db_version WHERE version_id = 6`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	if _, err := sqlite.Open(ctx, path, sqlite.Options{Existing: true}); !errors.Is(err, hookbox.ErrNoSchema) {
		t.Fatalf("opening a database with a gap: %v, want ErrNoSchema", err)
	}
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("migrating a database with a gap: %v", err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{Existing: true})
	if err != nil {
		t.Fatalf("after filling the gap: %v", err)
	}
	s.Close()
}
