package sqlite_test

import (
	"context"
	"fmt"
	"os"
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
	path := madeDB(t)
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("cannot make the file unwritable for this user (root ignores modes) with chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() }) // or TempDir cannot remove it
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
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

// childDBEnv names, in a copy of this test binary run as another user by
// asNobody, the database the test is to open.
const childDBEnv = "HOOKBOX_TEST_CHILD_DB"

// asNobody runs the test t again, in a copy of this test binary, as user
// and group 65534 (setpriv), with childDBEnv set to path, and fails t if
// that run fails. The directories above path are opened to every user to
// let it reach the file.
func asNobody(t *testing.T, path string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv: cannot run the test as a user the file's modes refuse")
	}
	dir := filepath.Dir(path)
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(filepath.Dir(dir), "sqlite.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), childDBEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test as user 65534: %v\n%s", err, out)
	}
	t.Logf("as user 65534:\n%s", out)
}

// TestMigrationLockOfAnotherUserSaysWhatToDo: a -migrate.lock file this
// user may not open (a `hookbox migrate` run as root made it) stopped
// serve with only "permission denied". The error names the file's owner,
// this user, and the chown that fixes it.
func TestMigrationLockOfAnotherUserSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	if path := os.Getenv(childDBEnv); path != "" {
		_, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err == nil {
			t.Fatal("Open succeeded with a lock file this user may not open")
		}
		t.Logf("Open: %v", err)
		lock := path + "-migrate.lock"
		want := fmt.Sprintf("run chown %d:%d %s", os.Geteuid(), os.Getegid(), lock)
		if msg := err.Error(); !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "the file belongs to uid ") ||
			!strings.Contains(msg, fmt.Sprintf("hookbox runs as uid %d", os.Geteuid())) || !strings.Contains(msg, want) {
			t.Errorf("Open: %v; want it to name the lock's owner, this user and %q", err, want)
		}
		return
	}
	path := madeDB(t)
	if os.Geteuid() != 0 {
		// The owner itself is refused a file of mode 0000.
		if err := os.Chmod(path+"-migrate.lock", 0); err != nil {
			t.Fatal(err)
		}
		t.Setenv(childDBEnv, path)
		TestMigrationLockOfAnotherUserSaysWhatToDo(t)
		return
	}
	// Root made the lock; the database and its directory are the
	// service user's.
	for _, p := range []string{path, filepath.Dir(path)} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	asNobody(t, path)
}

// TestOpenInUnwritableDirectorySaysWhatToDo: an account that may read the
// database but not write its directory (a monitoring user running
// `hookbox events list`) got "attempt to write a readonly database
// (1544)": SQLite must create the -shm file even to read. The error says
// which directory, and what to do.
func TestOpenInUnwritableDirectorySaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	if path := os.Getenv(childDBEnv); path != "" {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Existing: true})
		if err == nil {
			s.Close()
			t.Fatal("Open succeeded in a directory this user may not write")
		}
		t.Logf("Open: %v", err)
		if msg := err.Error(); !strings.Contains(msg, "needs to write the file and its directory "+filepath.Dir(path)) ||
			!strings.Contains(msg, "run it as the user that owns them") {
			t.Errorf("Open: %v; want it to say that the directory %s must be writable, and by whom", err, filepath.Dir(path))
		}
		return
	}
	path := madeDB(t)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		dir := filepath.Dir(path)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		t.Setenv(childDBEnv, path)
		TestOpenInUnwritableDirectorySaysWhatToDo(t)
		return
	}
	asNobody(t, path)
}

// TestMigrationLockOfAnotherUserNamesTheDatabasesOwner: hookbox run by a
// user other than the database's owner, on a lock root made, is told to
// run as the database's owner; the error told it to chown the lock to
// itself, which would then lock the service out.
func TestMigrationLockOfAnotherUserNamesTheDatabasesOwner(t *testing.T) {
	ctx := context.Background()
	if path := os.Getenv(childDBEnv); path != "" {
		_, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err == nil {
			t.Fatal("Open succeeded with a lock file this user may not open")
		}
		t.Logf("Open: %v", err)
		want := fmt.Sprintf("run hookbox as uid 65533 (the database's owner), then, while no hookbox runs on the database, chown 65533:65533 %s-migrate.lock", path)
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "chown 65534") {
			t.Errorf("Open: %v; want %q and no chown to this user", err, want)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the database and its lock to other users")
	}
	path := madeDB(t)
	// Root made the lock; the database is the service user's (65533),
	// and 65534 runs hookbox by mistake.
	for _, p := range []string{path, filepath.Dir(path)} {
		if err := os.Chown(p, 65533, 65533); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	asNobody(t, path)
}

// madeDB makes a database in a new directory, closes it and returns its
// path, with the -migrate.lock file its Open left there.
func madeDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
