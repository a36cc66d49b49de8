package main

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestBackupCommand: hookbox backup copies a SQLite database into a new
// file, private, and says how large and how long; it refuses a file that
// is not empty; on PostgreSQL it copies nothing, fails, and prints the
// pg_dump command without the password.
func TestBackupCommand(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	if _, err := st.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("bk", "1"), storetest.Delivery("bk", "2")}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "copy.db")
	out := mustCLI(t, "backup", file, "--db", dbURL)
	if !strings.Contains(out, "backed up "+config.SQLitePath(dbURL)+" to "+file+": ") || !strings.Contains(out, "kB in ") {
		t.Errorf("backup output: %q", out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the copy: %v, %v", fi, err)
	}
	copied := dbtest.Open(t, "sqlite:"+file)
	if evs, err := copied.Events(context.Background(), hookbox.Filter{}); err != nil || len(evs) != 2 {
		t.Errorf("the copy lists %d events, %v", len(evs), err)
	}
	if _, _, err := runCLI(t, "backup", file, "--db", dbURL); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("backup over a copy: %v", err)
	}

	pg := "postgres://hookbox:s3cret@db.internal:5432/hookbox?sslmode=require&pool_max_conns=8&search_path=hb"
	_, _, err = runCLI(t, "backup", "/backup/hookbox 1.dump", "--db", pg)
	if err == nil || !strings.Contains(err.Error(),
		`pg_dump --format=custom --file='/backup/hookbox 1.dump' --schema=hb 'postgres://hookbox@db.internal:5432/hookbox?sslmode=require'`) ||
		strings.Contains(err.Error(), "s3cret") {
		t.Errorf("backup on PostgreSQL: %v", err)
	}
}

// TestBackupOfAnOlderSchema: the upgrade's backup may come after the new
// binary was installed. backup refused a database an older hookbox had
// migrated ("run hookbox migrate first"), which sent the operator to
// migrate without the copy that is the only way back; and, made to open
// it, failed at versions 1 to 6 on statements their tables cannot run. It
// now copies the database as it is, at its version, whichever it is.
func TestBackupOfAnOlderSchema(t *testing.T) {
	entries, err := fs.Glob(sqlite.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v < int64(len(entries)); v++ {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		p, err := goose.NewProvider(goose.DialectSQLite3, db, sqlite.Migrations(), goose.WithAllowOutofOrder(true))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "copy.db")
		if out, _, err := runCLI(t, "backup", file, "--db", "sqlite:"+path); err != nil || !strings.Contains(out, "backed up") {
			t.Errorf("backup of a database at version %d: %q, %v", v, out, err)
			continue
		}
		cp, err := sql.Open("sqlite", "file:"+file)
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Close()
		var got int64
		if err := cp.QueryRow(`SELECT max(version_id) FROM goose_db_version`).Scan(&got); err != nil || got != v {
			t.Errorf("the copy is at version %d (%v), want %d", got, err, v)
		}
	}
}
