package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestBackupUnderIngest: a backup taken while a goroutine keeps storing
// deliveries through the store, one commit after another, finishes (the
// sqlite3 shell's .backup starts over after every write to the source and,
// under such traffic, never did); the copy passes integrity_check, holds
// every event stored before the backup started, opens as a hookbox
// database, and is readable by its owner only whatever the umask.
func TestBackupUnderIngest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "hookbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// About 20 MB, so that the copy takes a while and writes land during it.
	body := bytes.Repeat([]byte("x"), 1000)
	for b := 0; b < 40; b++ {
		ds := make([]hookbox.Delivery, 500)
		for i := range ds {
			ds[i] = storetest.Delivery("bk", fmt.Sprint("pre-", b, "-", i))
			ds[i].Payload = body
		}
		if _, err := s.Ingest(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu       sync.Mutex
		maxID    int64 // the largest id stored so far
		stop     = make(chan struct{})
		stopped  = make(chan error, 1)
		ingested atomic.Int64
		first    = make(chan struct{})
	)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			d := storetest.Delivery("bk", fmt.Sprint("live-", n))
			d.Payload = body
			rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
			if err != nil {
				stopped <- err
				return
			}
			mu.Lock()
			maxID = max(maxID, rs[0].ID)
			mu.Unlock()
			if ingested.Add(1) == 3 {
				close(first)
			}
		}
	}()
	<-first // ingest is under way

	mu.Lock()
	before := maxID
	mu.Unlock()
	during := ingested.Load()
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a generous ceiling
	defer cancel()
	copyPath := filepath.Join(dir, "copy.db")
	res, err := s.Backup(bctx, copyPath)
	during = ingested.Load() - during
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatalf("ingest during the backup: %v", err)
	}
	if err != nil {
		t.Fatalf("Backup under ingest: %v", err)
	}
	t.Logf("backup: %d bytes in %v; %d deliveries stored meanwhile", res.Bytes, res.Took, during)

	fi, err := os.Stat(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("the copy has mode %v, want 0600", perm)
	}
	if res.Path != copyPath || res.Bytes != fi.Size() || res.Bytes == 0 {
		t.Errorf("result %+v; the file has %d bytes", res, fi.Size())
	}
	db, err := sql.Open("sqlite", "file:"+copyPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check of the copy: %q, %v", check, err)
	}
	// Ids run from 1 with no gap (nothing was purged): every event stored
	// before the backup started is there when there are that many.
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE id <= ?`, before).Scan(&n); err != nil || n != before {
		t.Fatalf("the copy holds %d of the %d events stored before the backup started (%v)", n, before, err)
	}
	db.Close()
	c, err := sqlite.Open(ctx, copyPath, sqlite.Options{Existing: true})
	if err != nil {
		t.Fatalf("the copy does not open as a hookbox database: %v", err)
	}
	defer c.Close()
	if e, err := c.Event(ctx, before); err != nil || !bytes.Equal(e.Payload, body) {
		t.Fatalf("event %d in the copy: %v", before, err)
	}
}

// TestBackupFile: the copy goes only into a new or empty file (VACUUM
// INTO's rule), never over the database itself; a given empty file is
// made private; a failed backup leaves no file it created.
func TestBackupFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("bk", "1")}); err != nil {
		t.Fatal(err)
	}

	full := filepath.Join(dir, "full.db")
	if err := os.WriteFile(full, []byte("something"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, full); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("backup into a file that is not empty: %v", err)
	}
	if b, _ := os.ReadFile(full); string(b) != "something" {
		t.Errorf("the file refused was changed: %q", b)
	}
	for _, own := range []string{path, path + "-wal"} {
		if _, err := s.Backup(ctx, own); err == nil || !strings.Contains(err.Error(), "own file") {
			t.Errorf("backup into %s: %v", filepath.Base(own), err)
		}
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, empty); err != nil {
		t.Fatalf("backup into an empty file: %v", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Errorf("the empty file given: %v, %v", fi.Mode(), err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	gone := filepath.Join(dir, "gone.db")
	if _, err := s.Backup(cancelled, gone); err == nil {
		t.Fatal("a cancelled backup succeeded")
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("a failed backup left its file: %v", err)
	}
}
