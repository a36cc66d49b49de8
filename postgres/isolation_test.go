package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestReadCommittedWhateverTheDefault: a database whose transactions are
// SERIALIZABLE by default (ALTER DATABASE … SET
// default_transaction_isolation), or a URL that asks for REPEATABLE READ,
// leaves hookbox's sessions at READ COMMITTED: three stores ingesting,
// claiming and finishing at once all succeed. Before, claims and finishes
// that met a row another store had just changed failed with
// serialization failures (40001): work stalled and events were given
// back. The transactions handed to Go handlers and to InTx are READ
// COMMITTED too.
func TestReadCommittedWhateverTheDefault(t *testing.T) {
	t.Run("database serializable", func(t *testing.T) {
		admin, name, dbURL := ownDatabase(t)
		if _, err := admin.Exec(context.Background(), "ALTER DATABASE "+name+" SET default_transaction_isolation = 'serializable'"); err != nil {
			t.Fatal(err)
		}
		drainAtOnce(t, dbURL)
	})
	t.Run("URL repeatable read", func(t *testing.T) {
		drainAtOnce(t, pgtest.URL(t)+"&default_transaction_isolation=repeatable%20read")
	})
}

// drainAtOnce has three stores on dbURL ingest, claim and finish events
// at once, and checks that nothing fails and every event ends done, and
// that the transactions of InTx and of a work transaction are READ
// COMMITTED.
func drainAtOnce(t *testing.T, dbURL string) {
	t.Helper()
	ctx := context.Background()
	stores := []hookbox.Queue{open(t, dbURL), open(t, dbURL), open(t, dbURL)}
	s0 := open(t, dbURL)
	var level string
	if err := s0.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&level)
	}); err != nil {
		t.Fatal(err)
	}
	if level != "read committed" {
		t.Errorf("InTx runs at %s, want read committed", level)
	}
	w, err := s0.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Tx(nil).QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	w.Rollback()
	if level != "read committed" {
		t.Errorf("a work transaction runs at %s, want read committed", level)
	}

	const ingesters, each, batch = 3, 20, 5
	const total = ingesters * each * batch
	var wg sync.WaitGroup
	var done atomic.Int64
	failed := make(chan struct{})
	var failOnce sync.Once
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		failOnce.Do(func() { close(failed) })
	}
	for i := range ingesters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				var ds []hookbox.Delivery
				for j := range batch {
					ds = append(ds, storetest.Delivery("s", fmt.Sprint(i, "-", n, "-", j)))
				}
				if _, err := s0.Ingest(ctx, ds); err != nil {
					fail("ingest: %v", err)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, owner := stores[c%len(stores)], fmt.Sprint("claimer-", c)
			for done.Load() < total && time.Now().Before(deadline) {
				select {
				case <-failed:
					return
				default:
				}
				evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: owner, Limit: 4, Lease: time.Minute, Sources: []string{"s"}})
				if err != nil {
					fail("claim: %v", err)
					return
				}
				if len(evs) == 0 {
					time.Sleep(time.Millisecond) // nothing due: wait for an ingest
					continue
				}
				now := time.Now()
				var outs []hookbox.Outcome
				for _, e := range evs {
					outs = append(outs, hookbox.Outcome{ID: e.ID, Owner: owner, Attempt: e.Attempts,
						Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now})
				}
				errs, err := s.Finish(ctx, outs)
				if err != nil {
					fail("finish: %v", err)
					return
				}
				for _, e := range errs {
					if e != nil {
						fail("finish: %v", e)
						return
					}
				}
				done.Add(int64(len(evs)))
			}
		}()
	}
	wg.Wait()
	if n := done.Load(); n != total {
		t.Errorf("%d events done, want %d", n, total)
	}
}
