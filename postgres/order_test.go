package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// keyed is a delivery of source "o" routed to its target "t" with an
// order key.
func keyed(id, key string) hookbox.Delivery { return storetest.Keyed("o", "t", id, key) }

func claimByKey(t *testing.T, s *postgres.Store, owner string, limit int) []hookbox.Event {
	t.Helper()
	evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: owner, Limit: limit, Lease: time.Minute,
		Sources: []string{"o/t"}, ByKey: true})
	if err != nil {
		t.Error(err)
	}
	return evs
}

// TestClaimByKeyAfterLaterCommit: ids are drawn before commit, so two
// ingest transactions (two processes, or ingest.flushers) can make a
// delivery visible after a later one of its key was claimed. The earlier
// one then heads its key by id, and still waits until the running one
// ends: one delivery of a key at a time. (Without the leased-key check the
// second claim takes it at once.)
func TestClaimByKeyAfterLaterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	early, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback()
	first, err := early.Add(ctx, []hookbox.Delivery{keyed("1", "k")})
	if err != nil {
		t.Fatal(err)
	}
	late, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := late.Add(ctx, []hookbox.Delivery{keyed("2", "k")})
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if first[0].ID >= second[0].ID {
		t.Fatalf("ids %d and %d: the first transaction should have drawn the lower", first[0].ID, second[0].ID)
	}
	running := claimByKey(t, s, "a", 10)
	if len(running) != 1 || running[0].DeliveryID != "2" {
		t.Fatalf("claimed %+v, want delivery 2, the only one committed", running)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := claimByKey(t, s, "b", 10); len(evs) != 0 {
		t.Fatalf("claimed %s while delivery 2 of its key runs", evs[0].DeliveryID)
	}
	now := time.Now()
	if errs, err := s.Finish(ctx, []hookbox.Outcome{{ID: running[0].ID, Owner: "a", Attempt: 1,
		Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	if evs := claimByKey(t, s, "c", 10); len(evs) != 1 || evs[0].DeliveryID != "1" {
		t.Fatalf("after 2 finished: claimed %+v, want delivery 1", evs)
	}
}

// TestClaimByKeyTwoProcesses: two stores on one database (two hookbox
// processes) ingest deliveries of a few keys in transactions that commit
// out of id order, and claim by key from four claimers, each running what
// it claimed for a moment before finishing it. No key may ever run twice
// at once: a claim must see the leases of the claims before it, even when
// the two saw different heads for a key (serialLock).
func TestClaimByKeyTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	stores := []*postgres.Store{open(t, url), open(t, url)}
	const ingesters, each, keys = 4, 100, 6
	total := ingesters * each

	var wg sync.WaitGroup
	for i := range ingesters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%2]
			for n := range each {
				tx, err := s.BeginIngest(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				id := fmt.Sprint(i, "-", n)
				if _, err := tx.Add(ctx, []hookbox.Delivery{keyed(id, fmt.Sprint("k", rand.IntN(keys)))}); err != nil {
					tx.Rollback()
					t.Error(err)
					return
				}
				// Hold the transaction open a moment, so that others
				// that drew later ids commit first.
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}

	var mu sync.Mutex
	runningKeys := map[string]string{} // order key → delivery running with it
	var overlaps []string
	done := 0
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, owner := stores[c%2], fmt.Sprint("claimer-", c)
			for {
				mu.Lock()
				finished := done == total || t.Failed()
				mu.Unlock()
				if finished {
					return
				}
				evs := claimByKey(t, s, owner, 3)
				if len(evs) == 0 {
					time.Sleep(time.Millisecond) // nothing free: wait for a finish or an ingest
					continue
				}
				mu.Lock()
				for _, e := range evs {
					if other, ok := runningKeys[e.OrderKey]; ok {
						overlaps = append(overlaps, fmt.Sprintf("%s: %s and %s", e.OrderKey, other, e.DeliveryID))
					}
					runningKeys[e.OrderKey] = e.DeliveryID
				}
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond) // the app at work
				var outs []hookbox.Outcome
				now := time.Now()
				mu.Lock()
				for _, e := range evs {
					if runningKeys[e.OrderKey] == e.DeliveryID {
						delete(runningKeys, e.OrderKey)
					}
					outs = append(outs, hookbox.Outcome{ID: e.ID, Owner: owner, Attempt: e.Attempts,
						Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now})
				}
				mu.Unlock()
				errs, err := s.Finish(ctx, outs)
				if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
					t.Errorf("finish: %v %v", errs, err)
					return
				}
				mu.Lock()
				done += len(evs)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(overlaps) > 0 {
		t.Errorf("%d times a key ran twice at once, as %v", len(overlaps), overlaps[:min(5, len(overlaps))])
	}
	if done != total {
		t.Errorf("%d deliveries done, want %d", done, total)
	}
}
