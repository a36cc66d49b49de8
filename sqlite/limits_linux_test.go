package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/childtest"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// outOfDescriptorsEnv runs TestOutOfDescriptorsChild's body in a child
// process, which may lower its own descriptor limit.
const outOfDescriptorsEnv = "HOOKBOX_TEST_SQLITE_OUT_OF_FDS_DIR"

// TestIngestAndClaimOutOfDescriptors: a store opened before the process
// ran out of file descriptors (a flood of connections as hookbox starts)
// still stores deliveries durably and hands out claims. Before, the WAL
// syncer opened the -wal file at its first sync: out of descriptors, every
// ingest failed ("open WAL for sync: too many open files", 503 although
// the row was committed), and every claim's events stayed leased to
// nobody, an attempt spent, until their leases ended.
func TestIngestAndClaimOutOfDescriptors(t *testing.T) {
	childtest.Run(t, "TestOutOfDescriptorsChild", outOfDescriptorsEnv+"="+t.TempDir())
}

// TestOutOfDescriptorsChild is TestIngestAndClaimOutOfDescriptors's child.
func TestOutOfDescriptorsChild(t *testing.T) {
	dir := os.Getenv(outOfDescriptorsEnv)
	if dir == "" {
		t.Skip("run by TestIngestAndClaimOutOfDescriptors")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "hookbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := childtest.UseUpDescriptors(t, 256)
	rs, ierr := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")})
	evs, cerr := s.Claim(ctx, hookbox.ClaimParams{Sources: []string{"s"}, Limit: 10, Owner: "w", Lease: time.Minute})
	release()
	if ierr != nil || len(rs) != 1 {
		t.Fatalf("ingest out of descriptors: %v", ierr)
	}
	if cerr != nil || len(evs) != 1 {
		t.Fatalf("claim out of descriptors: %d events, %v", len(evs), cerr)
	}
}
