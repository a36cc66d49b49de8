package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestNoncesUnderSerializableDefault: on a server whose default isolation
// is SERIALIZABLE, concurrent batches over shared nonces still agree and
// none fails (UseNonces asks for READ COMMITTED; under SERIALIZABLE the
// conflicts would be serialization errors, a 503 for every delivery of
// the batch).
func TestNoncesUnderSerializableDefault(t *testing.T) {
	s := open(t, pgtest.URL(t)+"&default_transaction_isolation=serializable")
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	oks := make([][]bool, 8)
	for c := range 8 {
		wg.Go(func() {
			ns := make([]hookbox.Nonce, 20)
			for k := range ns {
				sum := sha256.Sum256([]byte(fmt.Sprint("body-", c%2)))
				ns[k] = hookbox.Nonce{Source: "mg", Value: fmt.Sprint("tok-", (k*3+c)%20), BodySHA256: sum[:], Signed: now, Now: now}
			}
			oks[c], errs[c] = s.UseNonces(context.Background(), ns)
		})
	}
	wg.Wait()
	won := map[bool]int{}
	for c := range 8 {
		if errs[c] != nil {
			t.Fatalf("batch %d: %v", c, errs[c])
		}
		for _, ok := range oks[c] {
			if ok {
				won[c%2 == 0]++
			}
		}
	}
	if won[true]+won[false] != 80 {
		t.Fatalf("accepted by body: %v; want 80 acceptances, one body per nonce", won)
	}
}
