package sqlite

import (
	"fmt"
	"os"
	"sync"
)

// walSyncer makes commits durable with as few fsyncs as possible, outside
// the write lock.
//
// With synchronous=FULL SQLite syncs the WAL inside every COMMIT, holding the
// only write lock for the whole disk flush, so nothing else can be written
// meanwhile. Instead the connection runs with synchronous=NORMAL (a commit
// writes its WAL frames but does not sync them) and Ingest, after its commit
// has released the lock, waits here until an fsync of the WAL file that
// started after the commit has finished. One fsync covers every commit made
// before it started, and the next transaction runs while it is in flight.
// The promise to the sender is the same as FULL: the delivery is on disk
// before it is acknowledged.
type walSyncer struct {
	path string

	mu        sync.Mutex
	cond      *sync.Cond
	f         *os.File
	committed uint64 // commits registered so far
	synced    uint64 // commits known to be on disk
	syncing   bool
}

func newWALSyncer(dbPath string) *walSyncer {
	w := &walSyncer{path: dbPath + "-wal"}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// committed registers a commit whose write calls have returned and returns
// its sequence number for waitDurable.
func (w *walSyncer) commit() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed++
	return w.committed
}

// waitDurable returns once commit seq is on disk.
func (w *walSyncer) waitDurable(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.synced < seq {
		if w.syncing {
			w.cond.Wait()
			continue
		}
		w.syncing = true
		target := w.committed
		w.mu.Unlock()
		err := w.sync()
		w.mu.Lock()
		w.syncing = false
		if err != nil {
			w.cond.Broadcast()
			return err
		}
		if target > w.synced {
			w.synced = target
		}
		w.cond.Broadcast()
	}
	return nil
}

// sync fsyncs the WAL file, reopening it if SQLite replaced it (which it
// does only when every connection closed).
func (w *walSyncer) sync() error {
	if w.f != nil {
		cur, err1 := os.Stat(w.path)
		open, err2 := w.f.Stat()
		if err1 != nil || err2 != nil || !os.SameFile(cur, open) {
			w.f.Close()
			w.f = nil
		}
	}
	if w.f == nil {
		f, err := os.Open(w.path)
		if err != nil {
			return fmt.Errorf("open WAL for sync: %w", err)
		}
		w.f = f
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("sync WAL: %w", err)
	}
	return nil
}

func (w *walSyncer) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		return w.f.Close()
	}
	return nil
}
