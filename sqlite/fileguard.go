package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
)

// fileGuard notices that the database file's path, or its WAL's, no
// longer names the file the store has open.
//
// SQLite keeps its files open by descriptor. A database file deleted,
// renamed away or replaced (mv other.db hookbox.db) under a running store
// goes on taking commits, into a file that no longer has that name: each
// commit is acknowledged, and all of them are gone when hookbox next
// starts on the path, which then holds another file or none. Likewise a
// deleted -wal file holds the commits not yet copied back into the
// database file. So before a commit is acknowledged (Store.settle), at
// each Ping, and when a write fails (Store.explain: a new file at the path
// makes SQLite's writes fail before any commit), the guard stats both
// paths, and once either names another file or none, it latches, as a failed fsync of the WAL does: every later
// acknowledgement and Ping fails with hookbox.ErrUnavailable (a 503, and
// /readyz not ready) until hookbox is restarted on a restored file.
//
// The database file is known by its identity at Open (device and inode,
// through os.SameFile): its inode stays allocated while the store holds it
// open, so no file created later at the path can have the same identity.
// The -wal file is known the same way: SQLite replaces it only when every
// connection has closed (see walSyncer.sync), and the store keeps
// connections open, so while the store is open the path names the WAL
// its writer writes. Existing is not enough: after a deletion, any
// connection opened on the file (a new reader of the store's pools,
// `hookbox events list`) creates a new, empty -wal at the path, while
// the writer goes on committing into the deleted one.
type fileGuard struct {
	path string
	log  *slog.Logger
	file os.FileInfo // the database file Open opened
	wal  os.FileInfo // the -wal file after Open, or nil if there was none
	// failed is the first check that found a path naming another file or
	// none, wrapped in a message for the operator; never cleared.
	failed atomic.Pointer[error]
	// closed is set as the store closes: SQLite removes the -wal file
	// when its last connection closes, which is no deletion to report.
	closed atomic.Bool
}

// newFileGuard records the identity of the database file at path, which
// the store has just opened, and whether its -wal file exists; it logs
// to log.
func newFileGuard(path string, log *slog.Logger) (*fileGuard, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		wal = nil
	}
	return &fileGuard{path: path, log: log, file: fi, wal: wal}, nil
}

// errStoreClosed is what every check returns once the store is closing.
var errStoreClosed = errors.New("sqlite: the store is closed")

// errFileGone is what every check wraps once the database file or its WAL
// was found deleted or replaced.
var errFileGone = errors.New("the SQLite database file hookbox has open was deleted or replaced: commits go into a file that no longer has its name and are lost at restart; restore the file and restart hookbox")

// err is the latched failure, or nil while both paths name the files the
// store has open.
func (g *fileGuard) err() error {
	if p := g.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// check returns nil if the database file's path still names the file the
// store has open and its -wal file exists; otherwise it latches (see
// fileGuard) and returns the failure. An error other than "no such file"
// from a stat (a directory this user may no longer search, an I/O error)
// fails this check only: the file may well still be there. Once the store
// is closing, it returns errStoreClosed and looks no further.
func (g *fileGuard) check() error {
	if err := g.err(); err != nil {
		return err
	}
	if g.closed.Load() {
		return errStoreClosed
	}
	cur, err := os.Stat(g.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return g.fail(g.path, "no file has its name")
	case err != nil:
		return fmt.Errorf("check database file: %w", err)
	case !os.SameFile(cur, g.file):
		return g.fail(g.path, "its name now belongs to another file")
	}
	if g.wal == nil {
		return nil
	}
	switch cur, err := os.Stat(g.path + "-wal"); {
	case errors.Is(err, fs.ErrNotExist):
		return g.fail(g.path+"-wal", "no file has its name")
	case err != nil:
		return fmt.Errorf("check database file: %w", err)
	case !os.SameFile(cur, g.wal):
		return g.fail(g.path+"-wal", "its name now belongs to another file")
	}
	return nil
}

// fail latches the finding that file (the database file or its WAL) was
// deleted or replaced, logs it once, and returns the latched error.
func (g *fileGuard) fail(file, what string) error {
	err := fmt.Errorf("%w (%s: %s)", errFileGone, file, what)
	if g.failed.CompareAndSwap(nil, &err) {
		g.log.Error("sqlite: the database file "+file+" was deleted or replaced while hookbox had it open; "+
			"refusing every delivery (503) until restarted: the deliveries stored since are in a file that no longer "+
			"has this name (a deleted file's data lasts until hookbox exits: on Linux, copy it from /proc/PID/fd first). "+
			"Restore the file and restart hookbox",
			"file", file, "found", what, "pid", os.Getpid())
	}
	return g.err()
}
