package service_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/service"
)

// pgTables counts the tables in the current schema of the PostgreSQL
// database dbURL names.
func pgTables(t *testing.T, dbURL string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenExistingOnly: with StoreOptions.Existing a store refuses a
// database without hookbox's schema (a mistyped SQLite path, a shared
// PostgreSQL schema) with an error matching hookbox.ErrNoSchema, and
// creates nothing: no file, no tables. A schema older than this binary's is
// refused the same way, saying to run hookbox migrate.
func TestOpenExistingOnly(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		path, isSQLite := strings.CutPrefix(dbURL, "sqlite:")
		st, err := service.OpenStore(ctx, dbURL, service.StoreOptions{Existing: true})
		if err == nil {
			st.Close()
			t.Fatal("opened a database without a hookbox schema")
		}
		if !errors.Is(err, hookbox.ErrNoSchema) || !strings.Contains(err.Error(), "hookbox migrate") {
			t.Errorf("error = %v, want one matching ErrNoSchema that says to run hookbox migrate", err)
		}
		if isSQLite {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the database file was created: %v", err)
			}
		} else if n := pgTables(t, dbURL); n != 0 {
			t.Fatalf("%d tables created in the shared schema", n)
		}

		// Once migrated, it opens.
		st, err = service.OpenStore(ctx, dbURL, service.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		st, err = service.OpenStore(ctx, dbURL, service.StoreOptions{Existing: true})
		if err != nil {
			t.Fatalf("open an existing database: %v", err)
		}
		st.Close()

		// A schema one migration behind this binary is refused.
		if err := rollBackOneMigration(t, dbURL); err != nil {
			t.Fatal(err)
		}
		st, err = service.OpenStore(ctx, dbURL, service.StoreOptions{Existing: true})
		if err == nil {
			st.Close()
			t.Fatal("opened a database whose schema is older than this binary's")
		}
		if !errors.Is(err, hookbox.ErrNoSchema) || !strings.Contains(err.Error(), "hookbox migrate") {
			t.Errorf("old schema: error = %v, want one matching ErrNoSchema that says to run hookbox migrate", err)
		}
	})
}

// TestOpenExistingRefusesForeignSQLite: an SQLite file that is not
// hookbox's (another app's database, an empty file) is refused and left
// without hookbox's tables.
func TestOpenExistingRefusesForeignSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := service.OpenStore(context.Background(), "sqlite:"+path, service.StoreOptions{Existing: true})
	if err == nil {
		st.Close()
		t.Fatal("opened an empty file as a hookbox database")
	}
	if !errors.Is(err, hookbox.ErrNoSchema) {
		t.Errorf("error = %v, want ErrNoSchema", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the file was changed: %v, %v", fi, err)
	}
}

// rollBackOneMigration makes the database look as an older hookbox left
// it: the newest migration is no longer recorded as applied.
func rollBackOneMigration(t *testing.T, dbURL string) error {
	t.Helper()
	const q = `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`
	ctx := context.Background()
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, q)
		return err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, q)
	return err
}

// TestOpenStoreMalformedURLHidesPassword: OpenStore refuses a database
// URL written slightly wrong with config.CheckDB's reason and never with
// the value: it quoted the value, masked by MaskDB, which returned such
// text whole, password included.
func TestOpenStoreMalformedURLHidesPassword(t *testing.T) {
	for db, want := range map[string]string{
		`"postgres://hook:QuotedPwXYZ@127.0.0.1:5432/hb"`: "is in quotes",
		" postgres://u:SpacePwXYZ@127.0.0.1:5999/db":      "spaces",
		"postgres:/u:SlashPwXYZ@h/db":                     "two slashes",
		"postgres//u:ColonPwXYZ@h/db":                     "a colon, then two slashes",
		"HOOKBOX_DB=postgres://u:TwicePwXYZ@h/db":         "variable's name",
		"host=h password=KvPwXYZ":                         "key=value connection string",
	} {
		_, err := service.OpenStore(context.Background(), db, service.StoreOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenStore(%q): %v, want %q", db, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "PwXYZ") {
			t.Errorf("OpenStore(%q) shows the password: %v", db, err)
		}
	}
}
