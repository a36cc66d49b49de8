package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// BackupResult says what Backup wrote.
type BackupResult struct {
	// Path is the copy's absolute path.
	Path string
	// Bytes is the copy's size.
	Bytes int64
	// Took is how long the copy took, from the file's creation to its
	// last sync.
	Took time.Duration
}

// Backup writes a consistent copy of the database to the file at path,
// as of the moment it starts, with VACUUM INTO on a connection of its own
// that opens the database read-only. That is one read transaction: in WAL
// mode the writer goes on beside it, so ingest and work go on while it
// copies, and no write makes it start over, where the sqlite3 shell's
// .backup copies a few pages at a time and starts again after any write
// to the source (under steady traffic it never finishes). The WAL grows
// while it reads, since checkpoints cannot pass a reader (see
// Options.MaxWALBytes), and shrinks again after.
//
// The copy holds every payload and header, as the database does: Backup
// creates the file readable by its owner only (0600) before VACUUM INTO
// writes into it, since SQLite would create it with the process umask. An
// existing empty file is used and made 0600 too; any other existing file
// is refused, as VACUUM INTO needs a new or empty file. The copy is a
// single file (journal_mode DELETE, no -wal beside it), synced to disk
// with its directory before Backup returns. On failure the file is
// removed (an empty one given is emptied again).
func (s *Store) Backup(ctx context.Context, path string) (BackupResult, error) {
	start := time.Now()
	abs, err := filepath.Abs(path)
	if err != nil {
		return BackupResult{}, fmt.Errorf("sqlite: backup to %s: %w", path, err)
	}
	if real, err := realPath(abs); err == nil {
		for _, own := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
			if real == own {
				return BackupResult{}, fmt.Errorf("sqlite: backup to %s: that is the database's own file; name a new file", path)
			}
		}
	}
	created, err := createBackupFile(abs)
	if err != nil {
		return BackupResult{}, err
	}
	res, err := s.backupInto(ctx, abs)
	if err != nil {
		if created {
			os.Remove(abs)
		} else {
			os.Truncate(abs, 0)
		}
		os.Remove(abs + "-journal")
		return BackupResult{}, fmt.Errorf("sqlite: backup to %s: %w", abs, err)
	}
	res.Took = time.Since(start)
	return res, nil
}

// BackupFile is Backup of the database at dbPath without a Store: it
// makes sure the file holds hookbox's tables at this hookbox's version
// or an older one (never a newer), then copies it as Backup does, as it
// is. An upgrade's backup may come after the new binary was installed,
// before it migrated the file: opening a Store would prepare statements
// an older schema cannot run. busy is how long to wait for a lock
// (5 s when 0).
func BackupFile(ctx context.Context, dbPath, path string, busy time.Duration) (BackupResult, error) {
	if busy <= 0 {
		busy = 5 * time.Second
	}
	real, err := realPath(dbPath)
	if err != nil {
		return BackupResult{}, err
	}
	if err := checkSchema(ctx, real, busy, true); err != nil {
		return BackupResult{}, err
	}
	return (&Store{path: real, busy: busy}).Backup(ctx, path)
}

// createBackupFile makes the file at path for VACUUM INTO: created new
// and private (0600), or an existing empty regular file made private.
// created says which, so that a failed backup removes only a file it
// made.
func createBackupFile(path string) (created bool, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return true, f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("sqlite: backup to %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return false, fmt.Errorf("sqlite: backup to %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return false, fmt.Errorf("sqlite: backup to %s: not a regular file", path)
	case fi.Size() > 0:
		return false, fmt.Errorf("sqlite: backup to %s: the file exists and is not empty (%d bytes); "+
			"VACUUM INTO writes only into a new or empty file: name a new file, or remove that one", path, fi.Size())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return false, fmt.Errorf("sqlite: backup to %s: %w", path, err)
	}
	return false, nil
}

// backupInto runs VACUUM INTO path on a read-only connection of its own,
// then syncs the copy and its directory.
func (s *Store) backupInto(ctx context.Context, path string) (BackupResult, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", s.busy.Milliseconds()))
	db, err := sql.Open("sqlite", fileURI(s.path, q))
	if err != nil {
		return BackupResult{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return BackupResult{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return BackupResult{}, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return BackupResult{}, fmt.Errorf("sync the copy: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return BackupResult{}, err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		err = dir.Sync()
		dir.Close()
		if err != nil {
			return BackupResult{}, fmt.Errorf("sync the copy's directory: %w", err)
		}
	}
	return BackupResult{Path: path, Bytes: fi.Size()}, nil
}
