package service_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestMigrateSessions: a database made before the table of console
// sessions (PostgreSQL schema 12, SQLite 10), holding events and a nonce,
// migrates with them intact, and sessions start, live and end on it.
func TestMigrateSessions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		now := time.Now()
		st := dbtest.Open(t, dbURL)
		rs, err := st.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("ms", "1"), storetest.Delivery("ms", "2")})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("body"))
		nonce := hookbox.Nonce{Source: "ms", Value: "tok", BodySHA256: sum[:], Signed: now, Now: now}
		if ok, err := st.UseNonces(ctx, []hookbox.Nonce{nonce}); err != nil || !ok[0] {
			t.Fatalf("UseNonces: %v, %v", ok, err)
		}

		// Back to the schema before the sessions table.
		if strings.HasPrefix(dbURL, "postgres") {
			st.Close()
			pgtest.MigrateDownTo(t, dbURL, 12)
		} else {
			execAll(t, st, `DROP TABLE sessions`, `DELETE FROM goose_db_version WHERE version_id = 12`)
			st.Close()
		}

		st2 := dbtest.Open(t, dbURL) // migrates
		for i, r := range rs {
			e, err := st2.Event(ctx, r.ID)
			if err != nil || e.Source != "ms" || e.DeliveryID != []string{"1", "2"}[i] {
				t.Fatalf("event %d after migrating: %+v, %v", r.ID, e, err)
			}
		}
		other := sha256.Sum256([]byte("another body"))
		nonce.BodySHA256 = other[:]
		if ok, err := st2.UseNonces(ctx, []hookbox.Nonce{nonce}); err != nil || ok[0] {
			t.Fatalf("after migrating, the nonce with another body: %v, %v; want refused", ok, err)
		}
		if err := st2.StartSession(ctx, hookbox.Session{ID: "s", Expires: now.Add(time.Hour), Now: now}); err != nil {
			t.Fatal(err)
		}
		if live, err := st2.SessionLive(ctx, "s", now); err != nil || !live {
			t.Fatalf("after migrating, a started session: live %v, %v", live, err)
		}
		if err := st2.EndSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if live, err := st2.SessionLive(ctx, "s", now); err != nil || live {
			t.Fatalf("after migrating, an ended session: live %v, %v", live, err)
		}
	})
}
