//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockRetry is how often lockMigrations tries again for a lock another
// process holds.
const lockRetry = 10 * time.Millisecond

// lockMigrations takes an exclusive flock(2) on the file path+"-migrate.lock"
// (created 0600 if need be), waiting while another process holds it or
// until ctx ends, and returns the function that releases it.
//
// goose takes no lock on SQLite: two processes opening a new file at once
// both see no migrations applied, both plan them all, and the second
// fails with "table events already exists". Holding this lock around
// reading the version and applying migrations makes them take turns; the
// second then finds the migrations applied. The lock is on a separate
// file, not the database: SQLite locks the database with fcntl(2) record
// locks, which flock(2) locks neither see nor disturb (nor would closing
// the lock file drop SQLite's locks, as closing any descriptor of the
// database file would). flock locks belong to the open file, so two
// stores in one process exclude each other too. The lock file stays
// behind: removing it would let a process that has just opened the old
// file lock it while another locks a new one.
func lockMigrations(ctx context.Context, path string) (unlock func(), err error) {
	f, name, err := openLockFile(path, "-migrate.lock", "migration lock")
	if err != nil {
		return nil, err
	}
	var t *time.Timer
	for {
		err := tryLock(f)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("sqlite: migration lock %s: %w", name, err)
		}
		if t == nil {
			t = time.NewTimer(lockRetry)
			defer t.Stop()
		} else {
			t.Reset(lockRetry)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("sqlite: waiting for another process to finish migrating %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}

// lockServe takes an exclusive flock(2) on the file path+"-serve.lock"
// (created 0600 if need be) without waiting, writes this process's pid
// into it, and returns the function that releases it. While another store
// holds it, in this process or another, it refuses with an error naming
// the pid written there (see Options.Serving). A process that dies
// releases the lock with its descriptors, so no stale lock is ever left
// to clear; the file stays, as the migration lock's does.
func lockServe(path string) (release func(), err error) {
	f, name, err := openLockFile(path, "-serve.lock", "serve lock")
	if err != nil {
		return nil, err
	}
	switch err := tryLock(f); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		who := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil && pid > 0 {
			who = fmt.Sprintf("process %d", pid)
			if pid == os.Getpid() {
				who = "another store of this process"
			}
		}
		return nil, fmt.Errorf("sqlite: %s already serves %s (it holds %s): run one hookbox serve per SQLite file; "+
			"stop the other first, or use PostgreSQL for several processes", who, path, name)
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("sqlite: serve lock %s: %w", name, err)
	}
	// Who holds it, for the next one's error. The lock is what counts;
	// a pid not written only makes that error vaguer.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// openLockFile opens the lock file path+suffix of the database path,
// creating it 0600 if need be, and returns it with its name; what names
// the lock in the error (see lockOpenError).
func openLockFile(path, suffix, what string) (*os.File, string, error) {
	name := path + suffix
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, name, lockOpenError(path, name, what, err)
	}
	return f, name, nil
}

// tryLock takes an exclusive flock(2) on f without waiting: nil, or an
// error matching syscall.EWOULDBLOCK while another open file holds it,
// or another error.
func tryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// lockOpenError is the error of opening name, the lock file (what, as
// "migration lock") of the database db. When this user may not open it
// (it belongs to another user: a `hookbox migrate` run as root made it),
// it names the file's owner and this process's user, and the chown that
// fixes it.
func lockOpenError(db, name, what string, err error) error {
	fi, serr := os.Stat(name)
	if !errors.Is(err, fs.ErrPermission) || serr != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	// The lock goes to the database file's owner, who must run hookbox;
	// this process's user is told so when it is someone else (giving
	// it the lock would lock the service out next).
	if dfi, derr := os.Stat(db); derr == nil {
		if dst, ok := dfi.Sys().(*syscall.Stat_t); ok && int(dst.Uid) != os.Geteuid() {
			return fmt.Errorf("sqlite: %s: %w; the file belongs to uid %d (gid %d, mode %04o), the database %s to uid %d, "+
				"and hookbox runs as uid %d: the database, its directory and this lock must belong to the user hookbox runs as; "+
				"run hookbox as uid %d (the database's owner), then, while no hookbox runs on the database, chown %d:%d %s && chmod 0600 %s; "+
				"or, if hookbox is meant to run as uid %d, give it the directory and every file of the database",
				what, err, st.Uid, st.Gid, fi.Mode().Perm(), db, dst.Uid, os.Geteuid(), dst.Uid, dst.Uid, dst.Gid, name, name, os.Geteuid())
		}
	}
	return fmt.Errorf("sqlite: %s: %w; the file belongs to uid %d (gid %d, mode %04o) and hookbox runs as uid %d: "+
		"it must belong to the user that owns the database, as the database file and its directory do; "+
		"while no hookbox runs on the database, run chown %d:%d %s && chmod 0600 %s",
		what, err, st.Uid, st.Gid, fi.Mode().Perm(), os.Geteuid(), os.Geteuid(), os.Getegid(), name, name)
}
