package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestDatabaseFileGoneRefused: the database file is deleted, renamed away
// or replaced by another file (or its -wal file is deleted) under a
// running store. SQLite goes on writing to the files it has open, which no
// longer have their names, so every receipt given since would be lost when
// hookbox restarts on the path. From then on Ingest (the sender's retry of
// a stored delivery included), Claim and Ping fail with
// hookbox.ErrUnavailable (503, /readyz not ready) naming the file, and it
// is said once in the log. Under FULL (the WAL syncer) and OFF (no syncer)
// alike. In "remove-recreate" another connection made a new database at
// the path after the deletion (as a pool's new connection did before
// connections were opened without create): the store's own writes then
// fail ("no such table"), and the failure must still say why.
func TestDatabaseFileGoneRefused(t *testing.T) {
	logs := captureLog(t)
	for _, sync := range []string{"FULL", "OFF"} {
		for _, how := range []string{"remove", "rename", "replace", "remove-wal", "remove-recreate"} {
			t.Run(sync+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "hookbox.db")
				s, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: sync})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				before := storetest.Delivery("s", "before")
				if _, err := s.Ingest(ctx, []hookbox.Delivery{before}); err != nil {
					t.Fatal(err)
				}
				if err := s.Ping(ctx); err != nil {
					t.Fatalf("Ping before: %v", err)
				}
				gone := path
				switch how {
				case "remove":
					err = os.Remove(path)
				case "rename":
					err = os.Rename(path, path+".moved")
				case "replace":
					if err = os.WriteFile(path+".new", nil, 0o600); err == nil {
						err = os.Rename(path+".new", path)
					}
				case "remove-wal":
					gone = path + "-wal"
					err = os.Remove(gone)
				case "remove-recreate":
					if err = os.Remove(path); err == nil {
						err = newDatabaseAt(path)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				logged := goneLines(logs, gone)

				for _, d := range []hookbox.Delivery{storetest.Delivery("s", "after"), before, storetest.Delivery("s", "later")} {
					rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
					if !errors.Is(err, hookbox.ErrUnavailable) || !strings.Contains(err.Error(), gone+": ") {
						t.Errorf("ingest of %s after the file was %sd: receipts %+v, err %v; want ErrUnavailable (503) saying what happened to %s, not a receipt for a row that no file at %s holds",
							d.DeliveryID, how, rs, err, gone, path)
					}
				}
				evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Sources: []string{"s"}})
				if !errors.Is(err, hookbox.ErrUnavailable) || len(evs) != 0 {
					t.Errorf("claim after the file was %sd: %d events, %v; want none and ErrUnavailable", how, len(evs), err)
				}
				err = s.Ping(ctx)
				if !errors.Is(err, hookbox.ErrUnavailable) || !strings.Contains(err.Error(), gone) {
					t.Errorf("Ping after the file was %sd: %v; want ErrUnavailable naming %s", how, err, gone)
				}
				if n := goneLines(logs, gone) - logged; n != 1 {
					t.Errorf("the log says %d times that %s was deleted or replaced, want once:\n%s", n, gone, logs)
				}
			})
		}
	}
}

// newDatabaseAt makes a new WAL database at path with a table and a row,
// as a connection opened there by another program, or by a pool that may
// create the file, would.
func newDatabaseAt(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	_, err = db.Exec(`CREATE TABLE other (a); INSERT INTO other VALUES (1)`)
	return errors.Join(err, db.Close())
}

// TestNoDatabaseMadeAtTheDeletedPath: after the database file is deleted
// under a running store, a connection its pools open (a reader, here the
// first) fails instead of creating an empty database at the path, which
// the next start would have taken for a new install and migrated.
func TestNoDatabaseMadeAtTheDeletedPath(t *testing.T) {
	captureLog(t)
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
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Event(ctx, rs[0].ID); err == nil {
		t.Errorf("event read after the file was deleted: %+v, want an error", ev)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat %s after a read: %v; want no file (the read created one)", path, err)
	}
}

// TestClosedStoreNotTakenForDeleted: calls made after Close (a worker
// pool still polling, in an app that closed its store first) fail without
// saying that the database file was deleted: SQLite removes the -wal file
// as its last connection closes, and the guard took that for a deletion,
// told the operator to restore the file, and logged it.
func TestClosedStoreNotTakenForDeleted(t *testing.T) {
	logs := captureLog(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "before")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, ingestErr := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "after")})
	_, claimErr := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Sources: []string{"s"}})
	pingErr := s.Ping(ctx)
	for what, err := range map[string]error{"ingest": ingestErr, "claim": claimErr, "ping": pingErr} {
		if err == nil || strings.Contains(err.Error(), "deleted or replaced") {
			t.Errorf("%s after Close: %v; want an error that does not say the file was deleted", what, err)
		}
	}
	if strings.Contains(logs.String(), "deleted or replaced") {
		t.Errorf("the log says the file was deleted after a Close:\n%s", logs)
	}
}

// goneLines is how many lines of logs say that file was deleted or
// replaced.
func goneLines(logs *syncbuf.Buffer, file string) int {
	return strings.Count(logs.String(), "database file "+file+" was deleted or replaced")
}

// captureLog points slog's default logger at a buffer until the test
// ends.
func captureLog(t *testing.T) *syncbuf.Buffer {
	l := &syncbuf.Buffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(l, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}
