// Package dbtest runs a test body once per database: as a "sqlite" subtest on
// a fresh file and a "postgres" subtest on a fresh schema (skipped without
// HOOKBOX_TEST_POSTGRES, failed under CI).
package dbtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/sqlite"
)

// Store is what both implementations are.
type Store interface {
	hookbox.Store
	hookbox.Queue
	hookbox.Ops
	hookbox.Transactor
}

// Each runs fn as parallel "sqlite" and "postgres" subtests, each with the
// URL of an empty database of its own.
func Each(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLiteURL(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.URL(t))
	})
}

// SQLiteURL returns the URL of a new database file in a temporary folder.
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "hookbox.db")
}

// Open opens the store at dbURL (as Each hands out) and closes it when the
// test ends.
func Open(t testing.TB, dbURL string) Store {
	t.Helper()
	var (
		s   Store
		err error
	)
	ctx := context.Background()
	if path, ok := cutPrefix(dbURL, "sqlite:"); ok {
		s, err = sqlite.Open(ctx, path, sqlite.Options{})
	} else {
		s, err = openPostgres(ctx, dbURL)
	}
	if err != nil {
		t.Fatalf("open %s: %v", dbURL, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPostgres(ctx context.Context, url string) (Store, error) {
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}
