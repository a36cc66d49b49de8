package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/hookbox/hookbox"
)

// BenchmarkIngestBatch measures Ingest on the ingest path's common cases:
// a batch of 64 new deliveries that dedupe by body too, and one new
// delivery twice in a batch (a sender's retry that arrived while the
// first copy waited for the group commit).
func BenchmarkIngestBatch(b *testing.B, s hookbox.Store) {
	n := 0
	next := func() hookbox.Delivery {
		n++
		d := Delivery("bench", fmt.Sprint("d-", n))
		sum := sha256.Sum256(d.Payload)
		d.BodySHA256 = sum[:]
		return d
	}
	b.Run("distinct-64", func(b *testing.B) {
		ds := make([]hookbox.Delivery, 64)
		for range b.N {
			for i := range ds {
				ds[i] = next()
			}
			rs, err := s.Ingest(context.Background(), ds)
			if err != nil || rs[63].Duplicate {
				b.Fatal(rs, err)
			}
		}
	})
	b.Run("twice", func(b *testing.B) {
		for range b.N {
			d := next()
			rs, err := s.Ingest(context.Background(), []hookbox.Delivery{d, d})
			if err != nil || rs[0].Duplicate || !rs[1].Duplicate {
				b.Fatal(rs, err)
			}
		}
	})
}
