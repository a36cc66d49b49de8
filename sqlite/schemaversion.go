package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// newerSchema refuses a database that a newer hookbox migrated: one whose
// version table records as applied a migration newer than the newest p
// embeds. goose's Up applies the known versions a database lacks and
// ignores applied versions it does not know, so without this check an
// older hookbox would open such a database and run its statements against
// tables it does not understand. The error matches hookbox.ErrNoSchema.
// A database without a version table yet passes. path names the database
// in the error.
func newerSchema(ctx context.Context, db *sql.DB, p *goose.Provider, path string) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`).Scan(&n)
	if err != nil {
		return fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	if n == 0 {
		return nil
	}
	gs, err := database.NewStore(database.DialectSQLite3, "goose_db_version")
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	rows, err := gs.ListMigrations(ctx, db)
	if err != nil {
		return fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	applied := newestApplied(rows)
	var known int64
	if srcs := p.ListSources(); len(srcs) > 0 {
		known = srcs[len(srcs)-1].Version
	}
	if applied > known {
		return noSchema("sqlite: the database at %s was migrated by a newer hookbox (schema version %d, this hookbox knows up to %d): run that version or newer", path, applied, known)
	}
	return nil
}

// newestApplied is the newest version rows record as applied. rows come
// newest first (goose lists them by id, descending), so the first row of a
// version is its current state: a version rolled back by an older goose,
// which recorded the rollback as a row with is_applied false, does not
// count.
func newestApplied(rows []*database.ListMigrationsResult) int64 {
	seen := make(map[int64]bool)
	var newest int64
	for _, r := range rows {
		if seen[r.Version] {
			continue
		}
		seen[r.Version] = true
		if r.IsApplied && r.Version > newest {
			newest = r.Version
		}
	}
	return newest
}
