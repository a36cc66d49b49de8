package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) hookbox.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestQueueConformance(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.QueueStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOpsConformance(t *testing.T) {
	storetest.RunOps(t, func(t *testing.T) storetest.FullStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestFilesArePrivate: the database file and its -wal and -shm files hold
// payloads and signatures, so only the owner may read them, whatever the
// process umask.
func TestFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("p", "1")}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(name), perm)
		}
	}
}

// TestOlderFirstAttemptRow: see storetest.OlderFirstAttemptRow.
func TestOlderFirstAttemptRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.OlderFirstAttemptRow(t, s, func(id int64, at time.Time) error {
		_, err := db.Exec(`INSERT INTO attempts (event_id, attempt, owner, outcome, started_at, finished_at)
            VALUES (?, 1, 'older', 'done', ?, ?)`, id, at.UnixMilli(), at.UnixMilli())
		return err
	})
}
