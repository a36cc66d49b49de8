package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// TestDamagedFileSaysWhatToDo: once the events table's pages are damaged
// on disk, a delivery is refused as unavailable (503) with SQLite's
// error and what to do: the file named, integrity_check, the last backup
// and restore-ids. Before, the log said only "database disk image is
// malformed (11)".
func TestDamagedFileSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ds []hookbox.Delivery
	for i := range 200 {
		d := storetest.Delivery("dmg", fmt.Sprint(i))
		d.Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 700)))
		ds = append(ds, d)
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	var root int64
	if err := s.reader.QueryRowContext(ctx, `SELECT rootpage FROM sqlite_master WHERE name = 'events'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The events table's root page gets a page type no b-tree page has.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x77}, (root-1)*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s, err = Open(ctx, path, Options{})
	if err == nil {
		defer s.Close()
		_, err = s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("dmg", "new")})
	}
	if err == nil {
		t.Fatal("a delivery was stored in a damaged table")
	}
	t.Log(err)
	for _, want := range []string{"the database file " + path + " is damaged", "PRAGMA integrity_check", "restore-ids"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if s != nil && !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("ingest's error %q is not ErrUnavailable (a 503)", err)
	}
}
