package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
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

// TestWALSyncerLatchesFailure: once an fsync of the WAL has failed, no
// commit is reported durable again: not a waiter whose commit the failed
// sync covered and that was waiting on it (it must not run a sync of its
// own, which would succeed without the pages the kernel may have dropped),
// nor a commit made afterwards; and no further sync is even tried.
func TestWALSyncerLatchesFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		if err := os.WriteFile(path+"-wal", []byte("frames"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := newWALSyncer(path)
		defer w.close()
		entered, release := make(chan struct{}), make(chan struct{})
		var syncs atomic.Int32
		w.syncFile = func(f *os.File) error {
			if syncs.Add(1) == 1 {
				close(entered)
				<-release
				return syscall.EIO
			}
			return datasync(f)
		}
		first, inRange := w.commit(), w.commit()
		firstErr, inRangeErr := make(chan error, 1), make(chan error, 1)
		go func() { firstErr <- w.waitDurable(first) }()
		<-entered // the sync covering both commits is in flight
		go func() { inRangeErr <- w.waitDurable(inRange) }()
		synctest.Wait() // the second waiter waits for that sync
		close(release)

		if err := <-firstErr; !errors.Is(err, syscall.EIO) {
			t.Errorf("the waiter whose sync failed got %v, want EIO", err)
		}
		if err := <-inRangeErr; err == nil {
			t.Errorf("a waiter whose commit the failed sync covered was reported durable")
		}
		if err := w.waitDurable(w.commit()); err == nil {
			t.Errorf("a commit made after a failed sync was reported durable")
		}
		if n := syncs.Load(); n != 1 {
			t.Errorf("%d syncs, want 1: none after the failure", n)
		}
	})
}

// TestIngestAfterFailedWALSync: through the store, on a real SQLite file,
// after the fsync of one ingest commit failed, the sender's retry (which
// finds the row, committed in SQLite's view) and a new delivery both get an
// error wrapping hookbox.ErrUnavailable (a 503), never a receipt (a 202),
// and Ping (/readyz) fails too; reopening the store clears it.
func TestIngestAfterFailedWALSync(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var failed atomic.Bool
	s.durable.syncFile = func(f *os.File) error {
		if failed.CompareAndSwap(false, true) {
			return syscall.EIO
		}
		return datasync(f)
	}
	a := storetest.Delivery("s", "a")
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{a}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Fatalf("ingest whose fsync failed: %+v, %v; want ErrUnavailable", rs, err)
	}
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{a}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("retry after a failed fsync: %+v, %v; want ErrUnavailable, not an acknowledgement", rs, err)
	}
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "b")}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("new delivery after a failed fsync: %+v, %v; want ErrUnavailable", rs, err)
	}
	if err := s.Ping(ctx); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("Ping after a failed fsync: %v; want ErrUnavailable", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after reopening: %v", err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "c")}); err != nil {
		t.Errorf("ingest after reopening: %v", err)
	}
}
