// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the server named by the environment, dropped when the test ends.
//
// Set HOOKBOX_TEST_POSTGRES to a connection URL, for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When it is unset,
// tests that need PostgreSQL are skipped, except under CI (the CI variable is
// set), where a missing server must not pass unnoticed and the test fails.
//
// Its relays (LateCanceller, CountCancels, ServeConns) stand between a
// test's store and the server, to play a server that acts on cancel
// requests late, count them, or answer as a pooler would.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/hookbox/hookbox/postgres"
)

// EnvURL is the environment variable that holds the server's URL.
const EnvURL = "HOOKBOX_TEST_POSTGRES"

// setupTimeout bounds connecting, creating and dropping a schema.
const setupTimeout = 10 * time.Second

// URL returns a connection URL whose search_path is a new, empty schema
// (hb_<random>), created for this test and dropped with everything in it when
// the test and its cleanups registered later have finished. It skips the test
// when HOOKBOX_TEST_POSTGRES is unset (fails it under CI), and fails it when
// the server cannot be reached.
func URL(t testing.TB) string {
	t.Helper()
	base, schema := newSchema(t)
	return WithSearchPath(base, schema)
}

// ClockURL is URL with the database's clock moved: in the new schema,
// now(), transaction_timestamp(), statement_timestamp() and
// clock_timestamp() read ahead later than the server's own (ahead may be
// negative), for every statement a store opened on the URL sends (its
// search_path puts the schema before pg_catalog, so these functions of
// the schema are the ones called). The test's process keeps the real
// clock, so a positive ahead is a database server whose clock is ahead of
// every hookbox host's, as when those hosts' clocks are behind it, and a
// negative one a server behind them: the whole host's clock is off, the
// store's own time.Now included, not only the times a caller passes.
// Column defaults of the hookbox schema call these functions too, since
// the store's migrations run on the URL.
func ClockURL(t testing.TB, ahead time.Duration) string {
	t.Helper()
	base, schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at %s=%s is unreachable: %v", EnvURL, redact(base), err)
	}
	defer conn.Close(context.Background())
	shift := fmt.Sprintf("%d * interval '1 microsecond'", ahead.Microseconds())
	for _, f := range []struct{ name, volatility string }{
		{"now", "STABLE"}, {"transaction_timestamp", "STABLE"}, {"statement_timestamp", "STABLE"}, {"clock_timestamp", "VOLATILE"},
	} {
		q := fmt.Sprintf(`CREATE FUNCTION %s.%s() RETURNS timestamptz LANGUAGE sql %s AS $$ SELECT pg_catalog.%s() + %s $$`,
			schema, f.name, f.volatility, f.name, shift)
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("create %s.%s: %v", schema, f.name, err)
		}
	}
	return WithSearchPath(base, schema+",pg_catalog")
}

// newSchema creates the schema of URL and ClockURL, dropped when the test
// ends, and returns the server's URL and the schema's name.
func newSchema(t testing.TB) (base, schema string) {
	t.Helper()
	return newSchemaIn(t, serverURL(t))
}

// URLIn is URL in the database at db (one CollatedDB made) rather than
// the environment's.
func URLIn(t testing.TB, db string) string {
	t.Helper()
	base, schema := newSchemaIn(t, db)
	return WithSearchPath(base, schema)
}

// newSchemaIn creates a schema in the database at base, dropped when the
// test ends, and returns base and the schema's name.
func newSchemaIn(t testing.TB, base string) (string, string) {
	t.Helper()
	schema := "hb_" + randomHex(8)

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at %s=%s is unreachable: %v", EnvURL, redact(base), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return base, schema
}

// serverURL is the server's URL from the environment. It skips the test
// when it is unset, and fails it so under CI.
func serverURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(EnvURL + " must be set in CI")
		}
		t.Skip(EnvURL + " is not set; skipping PostgreSQL test")
	}
	return base
}

// MigrateDownTo takes the hookbox schema at dbURL back to version (its
// data kept, as each migration's Down section keeps it), so a test can
// fill it as an older release would and check that migrating up keeps
// every row.
func MigrateDownTo(t testing.TB, dbURL string, version int64) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, postgres.Migrations(), goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.DownTo(ctx, version); err != nil {
		t.Fatalf("migrate down to %d: %v", version, err)
	}
}

// WithSearchPath returns the connection string u (a URL or key=value
// string) with search_path set to schema, replacing any search_path it had.
func WithSearchPath(u, schema string) string {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		if parsed, err := url.Parse(u); err == nil {
			q := parsed.Query()
			q.Set("search_path", schema)
			parsed.RawQuery = q.Encode()
			return parsed.String()
		}
	}
	// In a key=value string a later setting wins.
	return u + " search_path=" + schema
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("pgtest: random: %v", err))
	}
	return hex.EncodeToString(b)
}

// redact hides the password of a URL, for messages.
func redact(u string) string {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme == "" {
		return "(connection string not shown)"
	}
	return parsed.Redacted()
}

// HoldLock takes LOCK TABLE … IN ACCESS EXCLUSIVE MODE on tables (none:
// every table of dbURL's schema) in a transaction of its own, as a
// migration or VACUUM FULL would, held until the test ends.
func HoldLock(t testing.TB, dbURL string, tables ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if len(tables) == 0 {
		rows, err := tx.Query(ctx, `SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema()`)
		if err != nil {
			t.Fatal(err)
		}
		if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(tables) == 0 {
			t.Fatalf("the schema's tables: %v %v", tables, err)
		}
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(tables, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
}

// CollatedDB creates a database of its own whose default collation is
// the ICU locale icuLocale (such as "en-US"), as a database created with
// a server's usual locale has one, instead of the byte order of the
// suite's database: text compares and sorts there by language rules,
// where SQLite compares bytes. It returns the database's URL, for URLIn,
// and drops the database when the test ends.
func CollatedDB(t testing.TB, icuLocale string) string {
	t.Helper()
	base := serverURL(t)
	parsed, err := url.Parse(base)
	if err != nil || parsed.Scheme == "" {
		t.Fatalf("%s must be a URL for a database of its own", EnvURL)
	}
	name := "hb_" + randomHex(8)
	// Creating and dropping a database writes a checkpoint: slower than
	// a schema, and more so while other tests write.
	admin := func(q string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, q)
		return err
	}
	err = admin(fmt.Sprintf(`CREATE DATABASE %s TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8'
        LOCALE_PROVIDER icu ICU_LOCALE '%s'`, name, strings.ReplaceAll(icuLocale, "'", "''")))
	if err != nil {
		t.Fatalf("create database %s collated %s: %v", name, icuLocale, err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	parsed.Path = "/" + name
	return parsed.String()
}

// Database creates a database of its own, with the server's defaults, for
// a test that changes database-level settings (ALTER DATABASE … SET),
// which must not reach the database other tests share. It returns the
// database's name and URL, and drops it (ending its sessions) when the
// test ends. Settings are changed through AdminExec.
func Database(t testing.TB) (name, dbURL string) {
	t.Helper()
	base := serverURL(t)
	parsed, err := url.Parse(base)
	if err != nil || parsed.Scheme == "" {
		t.Fatalf("%s must be a URL for a database of its own", EnvURL)
	}
	name = "hb_" + randomHex(8)
	AdminExec(t, "CREATE DATABASE "+name)
	t.Cleanup(func() { AdminExec(t, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	parsed.Path = "/" + name
	return name, parsed.String()
}

// AdminExec runs q on the server's own database (the one the environment
// names), failing the test if it fails.
func AdminExec(t testing.TB, q string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := adminConn(t, ctx)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// adminConn connects to the server's own database (the one the
// environment names), failing the test if it cannot.
func adminConn(t testing.TB, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, serverURL(t))
	if err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable: %v", EnvURL, err)
	}
	return conn
}

// LimitedRole creates a login role that may hold at most limit
// connections (CONNECTION LIMIT: the server refuses one more with SQLSTATE
// 53300, as it refuses any client past max_connections, without a change
// to the server's settings) and a database of its own that the role owns,
// all dropped when the test ends. It returns the role's name and the URL
// that connects as it.
func LimitedRole(t testing.TB, limit int) (role, dbURL string) {
	t.Helper()
	role = "hookbox_conn_test_" + randomHex(8)
	AdminExec(t, fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", role, limit))
	t.Cleanup(func() { AdminExec(t, "DROP ROLE IF EXISTS "+role) })
	name, base := Database(t) // dropped before the role: cleanups run last first
	AdminExec(t, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", name, role))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return role, u.String()
}

// AwaitNoSessions waits until the server holds no session of role: a
// client that closed its connections has its backends end a moment
// later, and until they do they count against the role's CONNECTION
// LIMIT (LimitedRole). It fails the test if they have not ended within
// a minute.
func AwaitNoSessions(t testing.TB, role string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := adminConn(t, ctx)
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role).Scan(&n); err != nil {
			t.Fatalf("sessions of %s, after a minute: %v", role, err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d sessions of %s still open after a minute", n, role)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
