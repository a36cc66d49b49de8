package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/sqlite"
)

// childArgsEnv makes the test binary run hookbox with the arguments its
// value holds, one a line, for the tests that kill a real hookbox
// process part way (childCmd).
const childArgsEnv = "HOOKBOX_TEST_CHILD_ARGS"

// TestChildHelper runs hookbox with the arguments childArgsEnv holds; it
// is skipped unless childCmd starts it.
func TestChildHelper(t *testing.T) {
	args := os.Getenv(childArgsEnv)
	if args == "" {
		t.Skip("run by childCmd")
	}
	root := newRootCmd()
	root.SetArgs(strings.Split(args, "\n"))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// childCmd is the test binary running `hookbox args...` in a process of
// its own (TestChildHelper), with env added to the test's environment:
// a real hookbox a test can kill.
func childCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildHelper$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\n")), env...)
	return cmd
}

// startChild starts cmd (childCmd) with its output in out, kills it if
// it still runs when the test ends, and reports its end on exited.
func startChild(t *testing.T, cmd *exec.Cmd) (out *syncbuf.Buffer, exited <-chan error) {
	t.Helper()
	out = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return out, done
}

// The events TestMigrateKilledPartWay seeds, by status: of killSeeded
// events of source m, every thousandth pending, the next processing with
// a lease that ended (its worker gone), every hundredth dead, the rest
// done; and killSends done events of a recorded send (source
// send:forward, which migrations give effect keys).
const (
	killSeeded     = 100_000
	killPending    = killSeeded / 1000
	killProcessing = killSeeded / 1000
	killDead       = killSeeded / 100
	killSends      = 1000
)

// TestMigrateKilledPartWay: a database several versions behind
// (PostgreSQL at 9, before the queue table; SQLite at 10), holding
// 100,000 events in every status, whose `hookbox migrate` process is
// killed (SIGKILL) once the schema reaches a version (the migration after
// it then runs or is about to), is brought to the newest version by a
// second `hookbox migrate`, with every event there once in the status
// it had, every event with its queue row, every index valid, and the
// recorded sends keyed; then serve drains the unfinished events, the
// processing ones whose worker died among them.
func TestMigrateKilledPartWay(t *testing.T) {
	for _, c := range []struct {
		store string
		base  int64
		kills []int64 // kill once the schema is at this version
	}{
		{"postgres", 9, []int64{9, 15, 18}},
		{"sqlite", 10, []int64{10, 11, 13}},
	} {
		t.Run(c.store, func(t *testing.T) {
			t.Parallel()
			if c.store == "postgres" {
				pgtest.URL(t) // skips without PostgreSQL (fails under CI)
			}
			partWay := 0
			for _, at := range c.kills {
				t.Run(fmt.Sprint("at", at), func(t *testing.T) {
					dbURL := dbtest.SQLiteURL(t)
					if c.store == "postgres" {
						dbURL = pgtest.URL(t)
					}
					db := seedOldSchema(t, c.store, dbURL, c.base)
					killed := killMigrateAt(t, db, dbURL, at)
					newest := checkNoTornMigration(t, c.store, db, killed)
					t.Logf("killed at version %d of %d", killed, newest)
					if killed < newest {
						partWay++
					}
					out := mustCLI(t, "migrate", "--db", dbURL)
					if !strings.Contains(out, fmt.Sprintf("version %d", newest)) {
						t.Fatalf("the second migrate printed %q; want version %d", out, newest)
					}
					checkMigratedEvents(t, c.store, db)
					drainAfterMigrate(t, db, dbURL)
				})
			}
			if partWay == 0 {
				t.Errorf("every migrate process finished before it was killed: no kill happened part-way")
			}
		})
	}
}

// seedOldSchema makes the schema at dbURL of version base, in WAL mode
// on SQLite as hookbox makes its files, fills it as that version's
// hookbox would, and returns a handle on it.
func seedOldSchema(t *testing.T, store, dbURL string, base int64) *sql.DB {
	t.Helper()
	ctx := context.Background()
	var (
		db       *sql.DB
		err      error
		dialect  goose.Dialect
		fsys     fs.FS
		seedStmt []string
	)
	switch store {
	case "postgres":
		db, err = sql.Open("pgx", dbURL)
		dialect, fsys = goose.DialectPostgres, postgres.Migrations()
		seedStmt = []string{fmt.Sprintf(`INSERT INTO events (source, delivery_id, payload, status, attempts, lease_owner,
                next_attempt_at, created_at, updated_at)
            SELECT 'm', 'd' || g, convert_to('{"n":' || g || '}', 'UTF8'),
                CASE WHEN g %% 1000 = 1 THEN 'pending' WHEN g %% 1000 = 2 THEN 'processing'
                    WHEN g %% 100 = 0 THEN 'dead' ELSE 'done' END,
                CASE WHEN g %% 1000 = 1 THEN 0 ELSE 1 END,
                CASE WHEN g %% 1000 = 2 THEN 'gone-worker' END,
                now() - interval '1 minute', now() - interval '1 hour', now() - interval '1 hour'
            FROM generate_series(1, %d) g`, killSeeded),
			fmt.Sprintf(`INSERT INTO events (source, delivery_id, payload, status)
            SELECT 'send:forward', 'k' || g, '\x7b7d', 'done' FROM generate_series(1, %d) g`, killSends)}
	case "sqlite":
		path := strings.TrimPrefix(dbURL, "sqlite:")
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
		dialect, fsys = goose.DialectSQLite3, sqlite.Migrations()
		now := time.Now().UnixMilli()
		seedStmt = []string{fmt.Sprintf(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %d)
            INSERT INTO events (source, delivery_id, payload, status, attempts, lease_owner, next_attempt_at, created_at, updated_at)
            SELECT 'm', 'd' || n, CAST('{"n":' || n || '}' AS BLOB),
                CASE WHEN n %% 1000 = 1 THEN 'pending' WHEN n %% 1000 = 2 THEN 'processing'
                    WHEN n %% 100 = 0 THEN 'dead' ELSE 'done' END,
                CASE WHEN n %% 1000 = 1 THEN 0 ELSE 1 END,
                CASE WHEN n %% 1000 = 2 THEN 'gone-worker' END,
                %d, %d, %d
            FROM g`, killSeeded, now-60_000, now-3_600_000, now-3_600_000),
			fmt.Sprintf(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %d)
            INSERT INTO events (source, delivery_id, payload, status, next_attempt_at, created_at, updated_at)
            SELECT 'send:forward', 'k' || n, X'7b7d', 'done', %d, %d, %d FROM g`, killSends, now, now, now)}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, base); err != nil {
		t.Fatalf("migrate up to %d: %v", base, err)
	}
	for _, q := range seedStmt {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	return db
}

// schemaVersion is the newest version goose recorded as applied.
func schemaVersion(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow(`SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// killMigrateAt starts `hookbox migrate` on dbURL in a process of its
// own, kills it with SIGKILL as soon as the schema is at version at (or
// when it ends by itself), and returns the version the schema was left
// at.
func killMigrateAt(t *testing.T, db *sql.DB, dbURL string, at int64) int64 {
	t.Helper()
	// On PostgreSQL the kill waits, past version at, for the process's
	// session to be running one of a migration's statements (not goose's
	// nor the store's own), found by an application name of its own.
	app := fmt.Sprintf("migkill%d", time.Now().UnixNano())
	runningMigration := func() bool { return true }
	if !strings.HasPrefix(dbURL, "sqlite:") {
		dbURL = withApplicationName(dbURL, app)
		runningMigration = func() bool {
			var running string
			err := db.QueryRow(`SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 60) FROM pg_stat_activity
                WHERE application_name = $1 AND state = 'active'
                AND query ~* '^\s*(LOCK|CREATE|ALTER|DROP|INSERT|UPDATE|DELETE|WITH|ANALYZE)'
                AND query NOT LIKE '%goose_db_version%'`, app).Scan(&running)
			if errors.Is(err, sql.ErrNoRows) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killed while running %q", running)
			return true
		}
	}
	cmd := childCmd(nil, "migrate", "--db", dbURL)
	out, exited := startChild(t, cmd)
	var ended bool
	await(t, fmt.Sprintf("version %d or the process's end", at), func() bool {
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("migrate failed before it was killed: %v\n%s", err, out)
			}
			ended = true
			return true
		default:
		}
		return schemaVersion(t, db) >= at && runningMigration()
	})
	if !ended {
		if err := cmd.Process.Signal(os.Kill); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-exited
	}
	return schemaVersion(t, db)
}

// checkNoTornMigration checks, after the kill, that the schema holds
// what the versions goose recorded say and nothing of a later one: each
// migration and its version row commit together. It returns the newest
// version this hookbox knows.
func checkNoTornMigration(t *testing.T, store string, db *sql.DB, killed int64) int64 {
	t.Helper()
	// A table or index each of these versions makes, and no earlier one.
	marks := map[string]map[int64]string{
		"postgres": {10: "queue", 12: "nonces", 13: "sessions", 17: "queue_dead_keys", 18: "queue_dead", 19: "event_data_created"},
		"sqlite":   {10: "nonces", 11: "events_dead", 12: "sessions", 15: "events_dead_keys"},
	}[store]
	var newest int64 = 19
	if store == "sqlite" {
		newest = 15
	}
	exists := `SELECT count(*) FROM pg_class WHERE relname = $1 AND relnamespace = current_schema()::regnamespace`
	if store == "sqlite" {
		exists = `SELECT count(*) FROM sqlite_master WHERE name = ?`
	}
	for v, name := range marks {
		var n int
		if err := db.QueryRow(exists, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if got, want := n == 1, v <= killed; got != want {
			t.Errorf("killed at version %d: %s (version %d) exists: %v", killed, name, v, got)
		}
	}
	return newest
}

// checkMigratedEvents checks the seeded events after the second migrate:
// each there once, in its status, with its queue row; the sends keyed;
// every index valid.
func checkMigratedEvents(t *testing.T, store string, db *sql.DB) {
	t.Helper()
	got := map[string]int{}
	byStatus := `SELECT status, count(*) FROM events WHERE source = 'm' GROUP BY status`
	if store == "postgres" {
		byStatus = `SELECT status, count(*) FROM queue WHERE source = 'm' GROUP BY status`
	}
	rows, err := db.Query(byStatus)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		got[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"pending": killPending, "processing": killProcessing, "dead": killDead,
		"done": killSeeded - killPending - killProcessing - killDead}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events by status after migrating: %v, want %v", got, want)
	}
	checks := map[string]string{
		"distinct delivery ids of m": `SELECT count(DISTINCT delivery_id) FROM events WHERE source = 'm'`,
		"send keys":                  `SELECT count(*) FROM effect_keys WHERE scope = 'send:forward'`,
	}
	wantN := map[string]int{"distinct delivery ids of m": killSeeded, "send keys": killSends}
	if store == "postgres" {
		checks["distinct delivery ids of m"] = `SELECT count(DISTINCT delivery_id) FROM event_data WHERE source = 'm'`
		checks["events without a queue row"] = `SELECT count(*) FROM event_data d WHERE NOT EXISTS (SELECT 1 FROM queue q WHERE q.id = d.id)`
		checks["queue rows without an event"] = `SELECT count(*) FROM queue q WHERE NOT EXISTS (SELECT 1 FROM event_data d WHERE d.id = q.id)`
		checks["invalid indexes"] = `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE c.relnamespace = current_schema()::regnamespace AND NOT (i.indisvalid AND i.indisready)`
		wantN["events without a queue row"], wantN["queue rows without an event"], wantN["invalid indexes"] = 0, 0, 0
	}
	for what, q := range checks {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n != wantN[what] {
			t.Errorf("%s after migrating: %d, want %d", what, n, wantN[what])
		}
	}
	if store == "sqlite" {
		var ok string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			t.Errorf("integrity_check after migrating: %q, %v", ok, err)
		}
	}
}

// drainAfterMigrate runs serve on the migrated database with source m
// forwarding to a sink, until no event of m is pending or processing,
// and checks that the sink got each unfinished one.
func drainAfterMigrate(t *testing.T, db *sql.DB, dbURL string) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer sink.Close()
	cfg := filepath.Join(t.TempDir(), "hookbox.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`sources:
  - name: m
    scheme: none
    allow_ips: ["127.0.0.1/32"]
    forward: %q
`, sink.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, log, served := serveInProcess(t, ctx, cfg, dbURL)
	await(t, "serve to drain the unfinished events", func() bool {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM events WHERE source = 'm' AND status IN ('pending', 'processing')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v\n%s", err, log)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := 1; n <= killSeeded; n++ {
		key := fmt.Sprintf("m:d%d", n)
		if unfinished := n%1000 == 1 || n%1000 == 2; unfinished && got[key] == 0 {
			t.Errorf("%s was never forwarded", key)
		} else if !unfinished && got[key] != 0 {
			t.Errorf("%s, finished before, was forwarded", key)
		}
	}
}
