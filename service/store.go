package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/sqlite"
)

// StoreOptions carry the per-database settings OpenStore passes on.
type StoreOptions struct {
	SQLite   sqlite.Options
	Postgres postgres.Options
	// Existing opens an existing hookbox database only, on either store:
	// nothing is created or migrated, and a database without hookbox's
	// schema (or with an older one) is an error matching
	// hookbox.ErrNoSchema.
	Existing bool
}

// OpenStore opens the store a database URL names: "sqlite:PATH" for
// SQLite (a bare path is refused, as config.CheckDB refuses it),
// "postgres://…" or "postgresql://…" for PostgreSQL. Migrations are applied before it returns, unless
// opts.Existing. Any other value is refused with config.CheckDB's reason,
// which never repeats the value (it may hold a password).
func OpenStore(ctx context.Context, url string, opts StoreOptions) (hookbox.Store, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		o := opts.Postgres
		o.Existing = o.Existing || opts.Existing
		return postgres.Open(ctx, url, o)
	case strings.HasPrefix(url, "sqlite:"):
		o := opts.SQLite
		o.Existing = o.Existing || opts.Existing
		return sqlite.Open(ctx, config.SQLitePath(url), o)
	default:
		// The value is not repeated, even masked: it may be a URL
		// written wrong, whose password no mask can be sure to find.
		err := config.CheckDB(url)
		if err == nil {
			err = errors.New("want sqlite:PATH or postgres://…")
		}
		return nil, fmt.Errorf("database URL: %w", err)
	}
}

// IsPostgres reports whether url selects PostgreSQL.
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}
