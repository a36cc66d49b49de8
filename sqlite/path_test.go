package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestOpenThroughSymlink: a database path that is a symbolic link to a file
// in another directory (/var/lib/hookbox/hookbox.db -> /srv/...) works:
// SQLite keeps the WAL beside the link's target, and Ingest must sync that
// WAL rather than fail on a -wal beside the link. Both a target that exists
// and one Open has to create (private, like any file it creates) are
// covered, the link relative in the second case.
func TestOpenThroughSymlink(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		exists bool
	}{{"existing target", true}, {"missing target", false}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			linkDir, targetDir := filepath.Join(root, "lib"), filepath.Join(root, "srv")
			for _, d := range []string{linkDir, targetDir} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			target, link := filepath.Join(targetDir, "hookbox.db"), filepath.Join(linkDir, "hookbox.db")
			linkTo := filepath.Join("..", "srv", "hookbox.db")
			if tc.exists {
				s, err := sqlite.Open(ctx, target, sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				linkTo = target
			}
			if err := os.Symlink(linkTo, link); err != nil {
				t.Fatal(err)
			}

			s, err := sqlite.Open(ctx, link, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("p", "1")}); err != nil {
				t.Fatalf("Ingest through a symlinked path: %v", err)
			}
			if _, err := os.Stat(target + "-wal"); err != nil {
				t.Errorf("no WAL beside the link's target: %v", err)
			}
			if _, err := os.Lstat(link + "-wal"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a -wal beside the link: %v", err)
			}
			fi, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("the link's target has mode %v, want 0600", perm)
			}
		})
	}
}

// TestOpenPathWithURICharacters: '#', '?' and '%XX' are part of the file
// name, not a URI fragment, query or escape. Ingest succeeds, the event
// is in the file so named (a second Open, of an existing database, reads
// it back, and the file is no empty decoy), and no file named by a
// truncated or decoded path appears.
func TestOpenPathWithURICharacters(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"hook#box.db", "hook?box.db", "hook%23box.db", "hook box.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			s, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("p", "1")})
			if err != nil {
				s.Close()
				t.Fatalf("Ingest into %q: %v", name, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
				t.Fatalf("%q after Close: %v, %v (want a non-empty database file)", name, fi, err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), name) {
					t.Errorf("stray file %q beside %q", e.Name(), name)
				}
			}

			// Existing: the commands that only read check the schema
			// through a URI of their own.
			s, err = sqlite.Open(ctx, path, sqlite.Options{Existing: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ev, err := s.Event(ctx, rs[0].ID)
			if err != nil {
				t.Fatalf("reading the event back from %q: %v", name, err)
			}
			if ev.Source != "p" || ev.DeliveryID != "1" {
				t.Errorf("event read back = %s/%s, want p/1", ev.Source, ev.DeliveryID)
			}
		})
	}
}

// TestOpenRefusesMemory: ":memory:" cannot hold a store (every connection
// would get its own empty database, and there is no WAL to sync), so Open
// says so instead of creating a file named ":memory:".
func TestOpenRefusesMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := sqlite.Open(context.Background(), ":memory:", sqlite.Options{})
	if err == nil {
		s.Close()
		t.Fatal(`Open(":memory:") succeeded, want an error`)
	}
	if !strings.Contains(err.Error(), ":memory:") {
		t.Errorf("error %q does not name :memory:", err)
	}
	if _, err := os.Lstat(":memory:"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(`a file named ":memory:" was created: %v`, err)
	}
}
