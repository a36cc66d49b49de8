package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/hookbox/hookbox/internal/schemaversion"
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
	applied, known, newer, err := schemaversion.Newer(ctx, db, gs, p)
	if err != nil {
		return fmt.Errorf("sqlite: schema version of %s: %w", path, err)
	}
	if newer {
		return noSchema("sqlite: the database at %s was migrated by a newer hookbox (schema version %d, this hookbox knows up to %d): run that version or newer", path, applied, known)
	}
	return nil
}
