package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/hookbox/hookbox/internal/schemaversion"
)

// newerSchema refuses a database that a newer hookbox migrated: one whose
// version table in the current schema records as applied a migration newer
// than the newest p embeds. goose's Up applies the known versions a
// database lacks and ignores applied versions it does not know, so without
// this check an older hookbox would open such a database and run its
// statements against tables it does not understand. The error matches
// hookbox.ErrNoSchema. A schema without a version table yet passes. schema
// names the schema in the error.
func newerSchema(ctx context.Context, db *sql.DB, p *goose.Provider, schema string) error {
	gs, err := database.NewStore(database.DialectPostgres, "goose_db_version")
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	ext, ok := gs.(database.StoreExtender)
	if !ok {
		return errors.New("postgres: migrations: goose cannot tell whether its version table exists")
	}
	exists, err := ext.TableExists(ctx, db)
	if err != nil {
		return fmt.Errorf("postgres: schema version of %q: %w", schema, err)
	}
	if !exists {
		return nil
	}
	applied, known, newer, err := schemaversion.Newer(ctx, db, gs, p)
	if err != nil {
		return fmt.Errorf("postgres: schema version of %q: %w", schema, err)
	}
	if newer {
		return noSchema("postgres: the database in schema %q was migrated by a newer hookbox (schema version %d, this hookbox knows up to %d): run that version or newer", schema, applied, known)
	}
	return nil
}
