package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestDeletedWALRecreatedRefused: the -wal file is deleted under a running
// store, and before the next ingest some other connection to the file (a
// new reader of the store's own pool, or `hookbox events list` run by the
// operator) opens the database, which makes SQLite create a new, empty
// -wal at the path. The store's writer still writes into the deleted
// WAL: every commit since is lost at restart. The next ingest must not be
// acknowledged.
func TestDeletedWALRecreatedRefused(t *testing.T) {
	captureLog(t)
	for _, how := range []string{"own-reader", "other-connection"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "hookbox.db")
			s, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "before")})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "own-reader":
				s.Event(ctx, rs[0].ID) // a read on a reader connection opened now
			case "other-connection":
				db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
				if err != nil {
					t.Fatal(err)
				}
				var n int
				db.QueryRow(`SELECT count(*) FROM event_data`).Scan(&n)
				db.Close()
			}
			if _, err := os.Stat(path + "-wal"); err != nil {
				t.Logf("no new -wal at the path (%v)", err)
			}
			got, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "after")})
			if !errors.Is(err, hookbox.ErrUnavailable) {
				t.Errorf("ingest after the -wal was deleted and made again by another connection: receipts %+v, err %v; want ErrUnavailable (the commit went into the deleted WAL)", got, err)
			}
			if err := s.Ping(ctx); !errors.Is(err, hookbox.ErrUnavailable) {
				t.Errorf("Ping: %v, want ErrUnavailable", err)
			}
			if err != nil {
				return
			}
			// A crash now (SIGKILL, power loss): the next start finds the
			// files at the path, as they are. Copy them and look.
			crash := filepath.Join(t.TempDir(), "crash.db")
			for _, suffix := range []string{"", "-wal"} {
				b, err := os.ReadFile(path + suffix)
				if err != nil {
					continue
				}
				if err := os.WriteFile(crash+suffix, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			db, err := sql.Open("sqlite", "file:"+crash)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM event_data WHERE delivery_id = 'after'`).Scan(&n); err != nil {
				err2 := db.QueryRow(`SELECT count(*) FROM events WHERE delivery_id = 'after'`).Scan(&n)
				if err2 != nil {
					t.Fatalf("read the files as a restart would: %v / %v", err, err2)
				}
			}
			if n != 1 {
				t.Errorf("delivery \"after\" was acknowledged (%+v) but the files at %s hold %d rows of it: lost at restart", got, path, n)
			}
		})
	}
}
