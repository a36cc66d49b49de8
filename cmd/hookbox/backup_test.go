package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
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
