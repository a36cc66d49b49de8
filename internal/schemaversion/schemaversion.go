// Package schemaversion tells whether a database was migrated by a newer
// hookbox than the one opening it: goose's Up applies the known versions
// a database lacks and ignores applied versions it does not know, so
// without this check an older hookbox would open such a database and run
// its statements against tables it does not understand. Both stores use
// it on the rows of their goose version table.
package schemaversion

import (
	"context"
	"database/sql"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// Newer reads the version table of db through gs and reports the newest
// version recorded as applied and the newest p embeds, and whether the
// first is newer. Rows come newest first (goose lists them by id,
// descending), so the first row of a version is its current state: a
// version rolled back by an older goose, recorded as a row with is_applied
// false, does not count.
func Newer(ctx context.Context, db *sql.DB, gs database.Store, p *goose.Provider) (applied, known int64, newer bool, err error) {
	rows, err := gs.ListMigrations(ctx, db)
	if err != nil {
		return 0, 0, false, err
	}
	seen := make(map[int64]bool)
	for _, r := range rows {
		if seen[r.Version] {
			continue
		}
		seen[r.Version] = true
		if r.IsApplied && r.Version > applied {
			applied = r.Version
		}
	}
	if srcs := p.ListSources(); len(srcs) > 0 {
		known = srcs[len(srcs)-1].Version
	}
	return applied, known, applied > known, nil
}
