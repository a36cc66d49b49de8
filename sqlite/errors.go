package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hookbox/hookbox"
)

// isForeignKey reports whether err is SQLite's foreign key violation.
func isForeignKey(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

func sortByID(es []hookbox.Event) {
	slices.SortFunc(es, func(a, b hookbox.Event) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// openError is the error of opening the database at path. When SQLite
// could not write the file, its -wal or -shm companions, or the directory
// that holds them, it adds what to do: every command, even one that only
// reads, writes the -shm file, so an account that may read the database
// but not write its directory got only "attempt to write a readonly
// database (1544)".
func openError(path string, err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) && (e.Code()&0xff == sqlite3.SQLITE_READONLY || e.Code()&0xff == sqlite3.SQLITE_CANTOPEN) {
		dir := filepath.Dir(path)
		return fmt.Errorf("sqlite: open %s: %w; every hookbox command on a SQLite database, even one that only reads, "+
			"needs to write the file and its directory %s (for the -wal and -shm files beside it): run it as the user "+
			"that owns them (ls -ln %s) or as root, or work on a copy made with hookbox backup", path, err, dir, dir)
	}
	return fmt.Errorf("sqlite: open %s: %w", path, err)
}

// isCorrupt reports whether err holds SQLite's SQLITE_CORRUPT or
// SQLITE_NOTADB: the database file is damaged.
func isCorrupt(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	c := e.Code() & 0xff
	return c == sqlite3.SQLITE_CORRUPT || c == sqlite3.SQLITE_NOTADB
}

// corruptAdvice is what an operator should do about a damaged database
// file at path: every write that meets the damage fails (ingest answers
// 503), and nothing hookbox does repairs it.
func corruptAdvice(path string) string {
	return fmt.Sprintf("the database file %s is damaged: stop hookbox, keep a copy of the file and its -wal, "+
		"run sqlite3 %s 'PRAGMA integrity_check' to see what is hit, and restore the last backup "+
		"with hookbox restore-ids afterwards (docs/deploy.md, Backups: SQLite)", path, path)
}
