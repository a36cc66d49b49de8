package sqlite

import "testing"

// BenchmarkFileGuardCheck is what each acknowledged commit (a group
// commit of ingest, a claim, a logout) and each Ping pays to know the
// database path still names the open file: two stats.
func BenchmarkFileGuardCheck(b *testing.B) {
	s := openTemp(b)
	for range b.N {
		if err := s.file.check(); err != nil {
			b.Fatal(err)
		}
	}
}
