package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateSendKeys: a send recorded before effect.RecordSend claimed a
// key for it (PostgreSQL schema 14, SQLite 13: its event row only) gets
// its key from the migration, so once the send is done and purged, a
// RecordSend for the same key is still refused; the database's events are
// kept.
func TestMigrateSendKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		st := dbtest.Open(t, dbURL)
		rs, err := st.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("ms", "1")})
		if err != nil {
			t.Fatal(err)
		}
		record := func(st dbtest.Store) bool {
			var first bool
			if err := st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
				var err error
				first, err = effect.RecordSend(ctx, tx, "email", "ord_1", []byte(`{}`))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return first
		}
		if !record(st) {
			t.Fatal("the first RecordSend was refused")
		}
		// As an older hookbox left it: the send's event row, no key.
		pg := strings.HasPrefix(dbURL, "postgres")
		execAll(t, st, `DELETE FROM effect_keys WHERE scope = 'send:email'`)
		if pg {
			st.Close()
			pgtest.MigrateDownTo(t, dbURL, 14)
		} else {
			execAll(t, st, `DELETE FROM goose_db_version WHERE version_id = 14`)
			st.Close()
		}

		st2 := dbtest.Open(t, dbURL) // migrates
		if e, err := st2.Event(ctx, rs[0].ID); err != nil || e.DeliveryID != "1" {
			t.Fatalf("event %d after migrating: %+v, %v", rs[0].ID, e, err)
		}
		// The send is performed, then purged.
		evs, err := st2.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{effect.SendSource("email")}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim the send: %v, %v", evs, err)
		}
		now := time.Now()
		if errs, err := st2.Finish(ctx, []hookbox.Outcome{{ID: evs[0].ID, Owner: "w", Attempt: 1, Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		for {
			res, err := st2.Purge(ctx, hookbox.PurgeParams{Before: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Done > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond) // the cut-off must pass the finish
		}
		if record(st2) {
			t.Errorf("a send recorded before the upgrade, performed and purged, was recorded again: the migration gave it no key")
		}
	})
}
