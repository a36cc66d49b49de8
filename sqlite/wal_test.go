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

// TestWALBounded: after more is written than MaxWALBytes, the background
// checkpoint truncates the WAL instead of letting it keep everything
// written (PASSIVE checkpoints never shrink the file).
func TestWALBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	const limit = 1 << 20
	s, err := sqlite.Open(ctx, path, sqlite.Options{MaxWALBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for b := range 5 {
		ingestPayloads(t, s, b, 200)
	}
	size := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// About 4 MB were written, four times the bound: without it the file
	// would keep that size (PASSIVE checkpoints never shrink it). The
	// bounding checkpoint may already have run during the writes.
	deadline := time.Now().Add(30 * time.Second)
	for size() > limit {
		if time.Now().After(deadline) {
			t.Fatalf("WAL still %d bytes, want at most %d", size(), limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := s.Events(ctx, hookbox.Filter{Source: "w", Limit: 2000}); err != nil || len(n) != 1000 {
		t.Fatalf("after the checkpoint: %d events, %v", len(n), err)
	}
}

// TestWALStaysSmall: under back-to-back writes the writer's own
// checkpoints keep the WAL near 1000 pages, without the truncating bound
// (set out of reach here). With checkpoints left to the background
// connection alone, the file grew with everything written.
func TestWALStaysSmall(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{MaxWALBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var largest int64
	for b := range 160 { // 64 MiB of payloads
		ingestPayloads(t, s, b, 100)
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	if largest > 8<<20 {
		t.Fatalf("the WAL reached %d bytes while 64 MiB were written; want it kept near 4 MiB", largest)
	}
	t.Logf("largest WAL: %d bytes", largest)
}

// ingestPayloads stores n deliveries of 4 KiB in one Ingest, numbered
// within batch b.
func ingestPayloads(t *testing.T, s *sqlite.Store, b, n int) {
	t.Helper()
	body := make([]byte, 4096)
	var ds []hookbox.Delivery
	for i := range n {
		d := storetest.Delivery("w", fmt.Sprint(b, "-", i))
		d.Payload = body
		ds = append(ds, d)
	}
	if _, err := s.Ingest(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
}
