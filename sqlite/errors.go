package sqlite

import (
	"errors"
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
