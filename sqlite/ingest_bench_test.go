package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// BenchmarkIngestBatch stores a batch of 64 new deliveries, and one new
// delivery twice in a batch, under synchronous OFF so that the figures are
// the statements' cost and not the disk's.
func BenchmarkIngestBatch(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "h.db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkIngestBatch(b, s)
}
