package sqlite

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWALSyncerCoalesces: many concurrent commits are made durable by
// fewer syncs than commits, and every waiter returns.
func TestWALSyncerCoalesces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(path+"-wal", []byte("frames"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWALSyncer(path)
	defer w.close()
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.waitDurable(w.commit()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if w.synced != w.committed || w.committed != 200 {
		t.Fatalf("synced %d of %d commits", w.synced, w.committed)
	}
}

// TestWALSyncerReportsFailure: a WAL that cannot be synced is an error for
// the waiter, never a silent success.
func TestWALSyncerReportsFailure(t *testing.T) {
	w := newWALSyncer(filepath.Join(t.TempDir(), "missing.db"))
	if err := w.waitDurable(w.commit()); err == nil {
		t.Fatal("sync of a missing WAL reported success")
	}
}

// TestWALSyncerFollowsReplacedFile: if the WAL file is replaced (SQLite
// deletes it when the last connection closes), the syncer reopens it.
func TestWALSyncerFollowsReplacedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	os.WriteFile(path+"-wal", []byte("a"), 0o644)
	w := newWALSyncer(path)
	defer w.close()
	if err := w.waitDurable(w.commit()); err != nil {
		t.Fatal(err)
	}
	first := w.f
	os.Remove(path + "-wal")
	os.WriteFile(path+"-wal", []byte("b"), 0o644)
	if err := w.waitDurable(w.commit()); err != nil {
		t.Fatal(err)
	}
	if w.f == first {
		t.Fatal("kept syncing the deleted file")
	}
}
