package postgres_test

import (
	"testing"

	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// BenchmarkIngestBatch is storetest.BenchmarkIngestBatch on PostgreSQL.
func BenchmarkIngestBatch(b *testing.B) {
	storetest.BenchmarkIngestBatch(b, open(b, pgtest.URL(b)))
}
