package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestRestoredIDsNotHandedOutAgain: a file restored from a backup gives
// a new row its largest id plus one, so the ids handed out after the
// backup go to other deliveries; after RaiseIDFloor (hookbox
// restore-ids) the next id is above every id handed out before the
// restore, also after a restart and a purge in between. The placeholder
// that holds the floor goes with the first event stored above it.
func TestRestoredIDsNotHandedOutAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookbox.db")
	backup := filepath.Join(dir, "backup.db")
	openStore := func() *sqlite.Store {
		t.Helper()
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	store := func(s *sqlite.Store, id string) int64 {
		t.Helper()
		rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("rs", id)})
		if err != nil {
			t.Fatal(err)
		}
		return rs[0].ID
	}
	s := openStore()
	for i := range 5 {
		store(s, fmt.Sprint("before-", i))
	}
	if _, err := s.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	var handedOut int64
	for i := range 5 {
		handedOut = store(s, fmt.Sprint("after-", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The documented restore: hookbox stopped, its WAL removed, the copy
	// put in place.
	restore := func() {
		t.Helper()
		for _, name := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// What the step is for: without it, an id is handed out again.
	restore()
	s = openStore()
	if id := store(s, "post-restore"); id > handedOut {
		t.Fatalf("the restore was not played: the next id %d is past %d", id, handedOut)
	}
	s.Close()

	restore()
	s = openStore()
	f, err := s.RaiseIDFloor(ctx, hookbox.IDFloorParams{Gap: hookbox.DefaultIDGap})
	if err != nil {
		t.Fatal(err)
	}
	if f.Known != 5 || f.Floor != 5+hookbox.DefaultIDGap || !f.Moved {
		t.Errorf("RaiseIDFloor: %+v; the backup's largest id was 5", f)
	}
	s.Close()
	// hookbox starts again; a purge before any delivery keeps the
	// placeholder, the newest row.
	s = openStore()
	defer s.Close()
	if _, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if id := store(s, "post-restore"); id <= handedOut {
		t.Fatalf("after the step the next id is %d, handed out before the restore (up to %d)", id, handedOut)
	}
	if evs, err := s.Events(ctx, hookbox.Filter{Source: hookbox.IDFloorSource}); err != nil || len(evs) != 0 {
		t.Errorf("the placeholder is still there after the next event: %+v, %v", evs, err)
	}
	next := store(s, "post-restore-2")
	if next <= handedOut {
		t.Fatalf("the second event after the step got id %d", next)
	}
}

// TestPlaceholderOfAnotherProcessDeleted: a placeholder stored by another
// process while a store serves (hookbox restore-ids run beside hookbox
// serve) is deleted by the serving store's ingest, as one it stored
// itself. The serving store noted only the placeholders there at its Open,
// so this one stayed in lists until a restart.
func TestPlaceholderOfAnotherProcessDeleted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	serving, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer serving.Close()
	other, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := other.RaiseIDFloor(ctx, hookbox.IDFloorParams{Gap: 1000})
	if err != nil || !f.Moved {
		t.Fatalf("RaiseIDFloor: %+v, %v", f, err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	placeholders := func() int {
		t.Helper()
		evs, err := serving.Events(ctx, hookbox.Filter{Source: hookbox.IDFloorSource})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if n := placeholders(); n != 1 {
		t.Fatalf("%d placeholders after RaiseIDFloor, want 1", n)
	}
	// The serving store looks for one every second: ingest until it is
	// gone, every id above the floor.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; placeholders() > 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the placeholder is still listed after %d deliveries stored by the serving store", i)
		}
		rs, err := serving.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("live", fmt.Sprint("d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].ID <= f.Floor {
			t.Fatalf("event id %d at or below the floor %d", rs[0].ID, f.Floor)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
