//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	name := path + "-migrate.lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, lockOpenError(name, err)
	}
	var t *time.Timer
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if errors.Is(err, syscall.EINTR) {
			continue
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

// lockOpenError is the error of opening the migration lock file name.
// When this user may not open it (it belongs to another user: a
// `hookbox migrate` run as root made it), it names the file's owner and
// this process's user, and the chown that fixes it.
func lockOpenError(name string, err error) error {
	fi, serr := os.Stat(name)
	if !errors.Is(err, fs.ErrPermission) || serr != nil {
		return fmt.Errorf("sqlite: migration lock: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("sqlite: migration lock: %w", err)
	}
	// The lock goes to the database file's owner, who must run hookbox;
	// this process's user is told so when it is someone else (giving
	// it the lock would lock the service out next).
	db := strings.TrimSuffix(name, "-migrate.lock")
	if dfi, derr := os.Stat(db); derr == nil {
		if dst, ok := dfi.Sys().(*syscall.Stat_t); ok && int(dst.Uid) != os.Geteuid() {
			return fmt.Errorf("sqlite: migration lock: %w; the file belongs to uid %d (gid %d, mode %04o), the database %s to uid %d, "+
				"and hookbox runs as uid %d: the database, its directory and this lock must belong to the user hookbox runs as; "+
				"run hookbox as uid %d (the database's owner), then, while no hookbox runs on the database, chown %d:%d %s && chmod 0600 %s; "+
				"or, if hookbox is meant to run as uid %d, give it the directory and every file of the database",
				err, st.Uid, st.Gid, fi.Mode().Perm(), db, dst.Uid, os.Geteuid(), dst.Uid, dst.Uid, dst.Gid, name, name, os.Geteuid())
		}
	}
	return fmt.Errorf("sqlite: migration lock: %w; the file belongs to uid %d (gid %d, mode %04o) and hookbox runs as uid %d: "+
		"it must belong to the user that owns the database, as the database file and its directory do; "+
		"while no hookbox runs on the database, run chown %d:%d %s && chmod 0600 %s",
		err, st.Uid, st.Gid, fi.Mode().Perm(), os.Geteuid(), os.Geteuid(), os.Getegid(), name, name)
}
