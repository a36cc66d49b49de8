package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to read the schema version
	"github.com/pressly/goose/v3/database"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", to read the schema version

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
)

func newMigrateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema (serve does this on start too)",
		Long: `migrate creates hookbox's schema in a new database, or applies the schema
versions an older one lacks, and says which versions it applied; on a database
already at this hookbox's version it says so and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dbURL, err := checkDBURL(g)
			if err != nil {
				return err
			}
			opts, err := cliStoreOptions(g)
			if err != nil {
				return err
			}
			return migrate(cmd.Context(), cmd.OutOrStdout(), dbURL, opts)
		},
	}
}

// versionTable is the table in which goose, the migration library both
// stores use, records the schema versions applied.
const versionTable = "goose_db_version"

// migrate brings the schema of the database at dbURL to this hookbox's
// version and tells w what it did. The stores migrate inside Open and do
// not report what they applied, so migrate compares the version before and
// after: a database that opens as an existing one (Existing) is up to
// date; otherwise the version it was at is read first. opts are the CLI's
// (cliStoreOptions): its looks are bounded by their statement timeout;
// applying the migrations, whose statements may run long on a large
// database, only by its lock timeout, so that a migration waiting for a
// lock held elsewhere gives up instead of holding up every session
// queued behind it. The PostgreSQL store applies them through sessions
// that ask the server (14 and later) to check every second that migrate
// is still there (postgres.MigrationClientCheck), as serve's do: a
// migrate killed part-way leaves no statement running, or waiting for a
// lock, with the locks it took held until it ends.
func migrate(ctx context.Context, w io.Writer, dbURL string, opts service.StoreOptions) error {
	st, err := service.OpenStore(ctx, dbURL, opts)
	if err == nil {
		defer st.Close()
		versions, err := appliedVersions(ctx, st, dbURL)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "schema is up to date: version %d\n", last(versions))
		return st.Close()
	}
	if !errors.Is(err, hookbox.ErrNoSchema) {
		return err
	}
	// A failure to read the old version only makes the report vaguer:
	// opening the store below reports any real problem with the database.
	before, known := versionBefore(ctx, dbURL, opts.Postgres.StatementTimeout)
	apply := opts
	apply.Existing = false
	apply.Postgres.LockTimeout, apply.Postgres.StatementTimeout = opts.Postgres.StatementTimeout, 0
	st, err = service.OpenStore(ctx, dbURL, apply)
	if err != nil {
		return err
	}
	defer st.Close()
	versions, err := appliedVersions(ctx, st, dbURL)
	if err != nil {
		return err
	}
	after := last(versions)
	var applied []string
	for _, v := range versions {
		if v > before {
			applied = append(applied, fmt.Sprint(v))
		}
	}
	switch {
	case !known:
		fmt.Fprintf(w, "migrated the schema to version %d\n", after)
	case len(applied) == 0:
		// Another process migrated it between the two looks.
		fmt.Fprintf(w, "schema is up to date: version %d\n", after)
	case before == 0:
		fmt.Fprintf(w, "created the schema: applied %s %s (now at version %d)\n", plural(len(applied), "version", "versions"), strings.Join(applied, ", "), after)
	default:
		fmt.Fprintf(w, "upgraded the schema from version %d: applied %s %s (now at version %d)\n", before, plural(len(applied), "version", "versions"), strings.Join(applied, ", "), after)
	}
	return st.Close()
}

// appliedVersions lists the schema versions recorded as applied in st's
// database, in ascending order, without goose's base version 0.
func appliedVersions(ctx context.Context, st hookbox.Store, dbURL string) ([]int64, error) {
	gs, err := database.NewStore(gooseDialect(dbURL), versionTable)
	if err != nil {
		return nil, err
	}
	var versions []int64
	err = st.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		ms, err := gs.ListMigrations(ctx, tx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.IsApplied && m.Version > 0 && !slices.Contains(versions, m.Version) {
				versions = append(versions, m.Version)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	slices.Sort(versions)
	return versions, nil
}

// versionBefore reads the schema version of the database at dbURL, changing
// nothing: 0 for a new database (no file, or no version table). known is
// false when it could not be read, or not within timeout (when positive).
func versionBefore(ctx context.Context, dbURL string, timeout time.Duration) (v int64, known bool) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	driver, dsn := "pgx", dbURL
	if !service.IsPostgres(dbURL) {
		path := config.SQLitePath(dbURL)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return 0, true
		}
		// Read only, and never create the file.
		driver, dsn = "sqlite", "file:"+path+"?mode=rw&_pragma=query_only(1)&_pragma=busy_timeout(5000)"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return 0, false
	}
	defer db.Close()
	gs, err := database.NewStore(gooseDialect(dbURL), versionTable)
	if err != nil {
		return 0, false
	}
	exists, err := versionTableExists(ctx, gs, db)
	switch {
	case err != nil:
		return 0, false
	case !exists:
		return 0, true
	}
	v, err = gs.GetLatestVersion(ctx, db)
	switch {
	case errors.Is(err, database.ErrVersionNotFound):
		return 0, true
	case err != nil:
		return 0, false
	}
	return v, true
}

// versionTableExists reports whether db holds goose's version table. goose
// knows the query for PostgreSQL, not for SQLite.
func versionTableExists(ctx context.Context, gs database.Store, db *sql.DB) (bool, error) {
	if ext, ok := gs.(database.StoreExtender); ok {
		exists, err := ext.TableExists(ctx, db)
		if !errors.Is(err, errors.ErrUnsupported) {
			return exists, err
		}
	}
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, versionTable).Scan(&n)
	return n > 0, err
}

// gooseDialect is the goose dialect of the store dbURL selects.
func gooseDialect(dbURL string) database.Dialect {
	if service.IsPostgres(dbURL) {
		return database.DialectPostgres
	}
	return database.DialectSQLite3
}

// last is the last of versions, or 0.
func last(versions []int64) int64 {
	if len(versions) == 0 {
		return 0
	}
	return versions[len(versions)-1]
}
