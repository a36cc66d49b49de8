package service_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
// On PostgreSQL it runs again on a database of ICU's en-US collation,
// under which ';' sorts before ':': a range of sources from "send:" to
// "send;" found nothing there, and the keys were not given.
func TestMigrateSendKeys(t *testing.T) {
	dbtest.Each(t, testMigrateSendKeys)
	t.Run("postgres ICU en-US", func(t *testing.T) {
		testMigrateSendKeys(t, icuDatabase(t))
	})
}

// icuDatabase creates a PostgreSQL database of ICU's en-US collation for
// t, dropped when t ends, and returns its URL.
func icuDatabase(t *testing.T) string {
	t.Helper()
	base := pgtest.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("hookbox_icu_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`)
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path") // the test's schema is in the other database
	u.RawQuery = q.Encode()
	return u.String()
}

func testMigrateSendKeys(t *testing.T, dbURL string) {
	{
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
		// A newer event: SQLite's purge keeps the newest.
		if _, err := st2.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("ms", "newer")}); err != nil {
			t.Fatal(err)
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
	}
}
