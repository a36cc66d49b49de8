package sqlite_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestOpenRefusesUnwritableFile: a database file this user can only read
// (another user's with mode 0644; here the immutable attribute, which
// refuses writing to root too) is one SQLite quietly opens read-only, and
// a current schema needs no write to migrate: serve started, said ready,
// and answered 503 to every delivery. Open refuses it, saying which file
// and what to fix.
func TestOpenRefusesUnwritableFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("cannot make the file unwritable for this user (root ignores modes) with chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() }) // or TempDir cannot remove it
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err == nil {
		pingErr := s.Ping(ctx)
		_, ingErr := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "a")})
		s.Close()
		t.Fatalf("Open of a file it cannot write succeeded; Ping: %v; Ingest: %v", pingErr, ingErr)
	}
	t.Logf("Open: %v", err)
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "not writable") {
		t.Errorf("Open: %v; want it to say %s is not writable", err, path)
	}
}
