package sqlite

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// walSyncer makes commits durable with as few fsyncs as possible, outside
// the write lock.
//
// With synchronous=FULL SQLite syncs the WAL inside every COMMIT, holding the
// only write lock for the whole disk flush, so nothing else can be written
// meanwhile. Instead the connection runs with synchronous=NORMAL (a commit
// writes its WAL frames but does not sync them), and a caller that must
// know its commit is on disk waits here, after the commit has released the
// lock, until an fsync of the WAL file that started after the commit has
// finished. One fsync covers every commit made before it started (the WAL
// is one file, written in commit order), and the next transaction runs
// while it is in flight.
//
// The rule: nothing leaves the store before it is on disk. Two kinds of
// call wait:
//
//   - Ingest, before a delivery is acknowledged (the promise behind a 202,
//     the same as FULL's).
//   - Claim, before it hands leased events to a worker: the worker may act
//     on the world (forward, exec, a send recorded by effect.RecordSend),
//     so the claim's counted attempt, and every commit before it, must
//     outlive a power loss. That covers whatever made the event claimable:
//     the work transaction of a Go handler that recorded the send, a
//     replay, and the finish of the delivery before it on its order key.
//     Otherwise a power loss could undo the send's record and its claim
//     after the email went out: the handler would run again, record the
//     send again, and the email would go twice, never shown as uncertain.
//
// Other commits do not wait: finishes, lease extensions, and the work
// transactions in which Go handlers run over events they picked. A power
// loss may undo the last of those, which means work done again, never an
// effect outside the database done twice unseen: a handler's writes are
// undone with its event's state, and a claimed event whose finish is
// undone is left leased, its attempt counted, to be claimed again when the
// lease ends.
//
// A failed fsync of the WAL is latched (see failed): Linux may mark the
// pages it could not write clean, and reports the error only once, so a
// later fsync that succeeds says nothing about them. From then on every
// waitDurable fails, and the store is unavailable until it is reopened
// (a restart reads the WAL back from disk), as PostgreSQL PANICs on a
// failed fsync.
type walSyncer struct {
	path string
	log  *slog.Logger
	// syncFile flushes the WAL file: datasync, which tests replace.
	syncFile func(*os.File) error
	// failed is the first failed fsync, wrapped in a message for the
	// operator; once set it is never cleared.
	failed atomic.Pointer[error]

	mu        sync.Mutex
	cond      *sync.Cond
	f         *os.File
	committed uint64 // commits registered so far
	synced    uint64 // commits known to be on disk
	syncing   bool
}

// newWALSyncer syncs the WAL of the database file at dbPath, which must be
// the file's real path (realPath): SQLite keeps the WAL beside the file a
// symbolic link leads to, not beside the link.
func newWALSyncer(dbPath string, log *slog.Logger) *walSyncer {
	w := &walSyncer{path: dbPath + "-wal", syncFile: datasync, log: log}
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

// errWALSyncFailed is what every waitDurable wraps once a sync of the WAL
// has failed.
var errWALSyncFailed = errors.New("an fsync of the SQLite WAL failed: commits since the last good fsync may never reach the disk; check the disk, then restart hookbox")

// err is the latched sync failure, or nil while every sync has succeeded.
func (w *walSyncer) err() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// waitDurable returns once commit seq is on disk, or an error: at once, for
// any seq, after a sync of the WAL has failed (see walSyncer).
func (w *walSyncer) waitDurable(seq uint64) error {
	if err := w.err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.synced < seq {
		// A waiter woken by a failed sync must not run one of its own: it
		// would succeed without its pages, which the kernel may have
		// dropped.
		if err := w.err(); err != nil {
			return err
		}
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

// prime opens the WAL file, when it exists, before the store is shared:
// the syncs that follow then need no descriptor of their own, so a process
// that runs out of them (a flood of connections as it starts) can still
// acknowledge deliveries and hand out claims. Until the first sync opened
// it, every ingest got 503 and every claim's events were left leased, an
// attempt spent, until their leases ended. A WAL it cannot open now is
// opened by the first sync, as before.
func (w *walSyncer) prime() {
	if f, err := os.Open(w.path); err == nil {
		w.f = f
	}
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
	if err := w.syncFile(w.f); err != nil {
		w.fail(err)
		return w.err()
	}
	return nil
}

// fail latches the first failed fsync of the WAL and logs it once.
func (w *walSyncer) fail(cause error) {
	err := fmt.Errorf("%w (%s: %w)", errWALSyncFailed, w.path, cause)
	if w.failed.CompareAndSwap(nil, &err) {
		w.log.Error("sqlite: fsync of the write-ahead log failed; refusing every delivery (503) until restarted: "+
			"deliveries committed since the last good fsync may be lost on a power failure. "+
			"Check the disk (dmesg, free space), then restart hookbox",
			"wal", w.path, "err", cause)
	}
}

func (w *walSyncer) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
