package effect_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/worker"
)

// race runs fn in a transaction of a and one of b at the same moment and
// returns their errors. On PostgreSQL both transactions are open, each
// having run a statement, before either runs fn, so their writes overlap;
// SQLite's write transactions begin IMMEDIATE and take turns, so there
// both start at once and the second waits for the first.
func race(dbURL string, a, b dbtest.Store, fn func(ctx context.Context, tx *hookbox.Tx, who int) error) [2]error {
	overlap := strings.HasPrefix(dbURL, "postgres")
	var ready, open sync.WaitGroup
	ready.Add(2)
	open.Add(2)
	start := make(chan struct{})
	var errs [2]error
	var done sync.WaitGroup
	for i, s := range []dbtest.Store{a, b} {
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			errs[i] = s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
				if overlap {
					if _, err := tx.ExecContext(ctx, `SELECT 1`); err != nil {
						open.Done()
						return err
					}
					open.Done()
					open.Wait()
				}
				return fn(ctx, tx, i)
			})
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}

// TestClaimKeyRaceTwoStores: two stores on one database (two processes)
// claim the same key for two different events in transactions open at
// the same moment. Exactly one claim reports true, neither fails, and
// effect_keys names the winner's event; on PostgreSQL the loser waits
// for the winner's commit instead of seeing no row and claiming too.
func TestClaimKeyRaceTwoStores(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		a, b := dbtest.Open(t, dbURL), dbtest.Open(t, dbURL)
		for round := range 40 {
			key := fmt.Sprintf("ord_%d", round)
			var first [2]bool
			errs := race(dbURL, a, b, func(ctx context.Context, tx *hookbox.Tx, who int) error {
				var err error
				first[who], err = effect.ClaimKey(ctx, tx, &hookbox.Event{ID: int64(100 + who)}, "licence", key)
				return err
			})
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("round %d: errors %v", round, errs)
			}
			if first[0] == first[1] {
				t.Fatalf("round %d: claims reported %v; want exactly one true", round, first)
			}
			winner := int64(100)
			if first[1] {
				winner = 101
			}
			var id int64
			if err := a.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
				return tx.QueryRowContext(ctx, `SELECT event_id FROM effect_keys WHERE scope = 'licence' AND key = $1`, key).Scan(&id)
			}); err != nil || id != winner {
				t.Fatalf("round %d: effect_keys names event %d (%v); the winner was %d", round, id, err, winner)
			}
		}
	})
}

// TestApplyIfNewerRaceTwoStores: two stores apply the same version of one
// new row at the same moment: exactly one writes (the other finds it as
// new, not older, and leaves it); then two newer versions race, and the
// row ends with the newest, whichever commits first.
func TestApplyIfNewerRaceTwoStores(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		a, b := dbtest.Open(t, dbURL), dbtest.Open(t, dbURL)
		if err := a.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL, version BIGINT NOT NULL)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for round := range 20 {
			id := fmt.Sprintf("sub_%d", round)
			var applied [2]bool
			apply := func(versions [2]int64) [2]error {
				return race(dbURL, a, b, func(ctx context.Context, tx *hookbox.Tx, who int) error {
					var err error
					applied[who], err = effect.ApplyIfNewer(ctx, tx, "subscriptions", "id", "version",
						map[string]any{"id": id, "status": fmt.Sprintf("by %d at %d", who, versions[who]), "version": versions[who]})
					return err
				})
			}
			if errs := apply([2]int64{5, 5}); errs[0] != nil || errs[1] != nil {
				t.Fatalf("round %d: errors %v", round, errs)
			}
			if applied[0] == applied[1] {
				t.Fatalf("round %d: equal versions of a new row: applied %v, want exactly one", round, applied)
			}
			if errs := apply([2]int64{9, 10}); errs[0] != nil || errs[1] != nil {
				t.Fatalf("round %d: errors %v", round, errs)
			}
			if !applied[1] {
				t.Errorf("round %d: version 10 over 5 (and maybe 9) was not applied", round)
			}
			if got := status(t, a, id); !strings.HasSuffix(got, " at 10") {
				t.Errorf("round %d: status %q after versions 9 and 10 raced; want version 10's", round, got)
			}
		}
	})
}

// keyed is the effect a handler of TestClaimKeyPoolsRaceAndFail applies
// once per key: its key, and the event that applied it.
const keyedTable = `CREATE TABLE keyed (key TEXT NOT NULL, event_id BIGINT NOT NULL)`

// TestClaimKeyPoolsRaceAndFail: two pools on two stores of one database
// (two processes) work events that come in pairs about one key, in random
// order, so claims of a key race across transactions and processes. Each
// handler claims the key and, when first, applies the effect; a quarter of
// first attempts then fail with an error, a quarter panic, a quarter run
// past their timeout: their claims must roll back with them, or the key's
// effect would never be applied. Every event ends done with the effect
// applied exactly once per key, by the event effect_keys names. Replaying
// every event applies nothing again, nor do new events about the same keys
// after retention purged the old ones.
func TestClaimKeyPoolsRaceAndFail(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		a, b := dbtest.Open(t, dbURL), dbtest.Open(t, dbURL)
		if err := a.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, keyedTable)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		const keys = 60
		handler := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			key := string(ev.Payload)
			first, err := effect.ClaimKey(ctx, tx, ev, "order", key)
			if err != nil {
				return err
			}
			// A failure between the claim and the effect: a claim kept
			// from such an attempt would leave the key's effect unapplied.
			if ev.Attempts-ev.AttemptBase == 1 && !strings.HasPrefix(ev.DeliveryID, "late-") {
				switch ev.ID % 4 {
				case 0:
					return errors.New("fails after its claim")
				case 1:
					panic("panics after its claim")
				case 2:
					<-ctx.Done() // past its timeout
					return ctx.Err()
				}
			}
			if first {
				_, err = tx.ExecContext(ctx, `INSERT INTO keyed (key, event_id) VALUES ($1, $2)`, key, ev.ID)
			}
			return err
		}
		// A timeout of 100 ms, not 300: a quarter of the first attempts
		// wait for it, and on SQLite each holds the one writer meanwhile
		// (19.5 s for the sqlite run under -race with 300 ms, 8.7 s now).
		pol := worker.Policy{MaxAttempts: 100, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Timeout: 100 * time.Millisecond}
		var pools []*worker.Pool
		for _, s := range []dbtest.Store{a, b} {
			p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, BatchSize: 16, TxWorkers: 2})
			p.SetPolicy("orders", pol)
			p.Handle("orders", "", handler)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			pools = append(pools, p)
			t.Cleanup(func() { p.Stop(context.Background()) })
		}
		ingest := func(prefix string) {
			t.Helper()
			var ds []hookbox.Delivery
			for k := range keys {
				for _, copy := range []string{"a", "b"} {
					ds = append(ds, hookbox.Delivery{Source: "orders", DeliveryID: fmt.Sprintf("%s%s-%d", prefix, copy, k),
						Payload: []byte(fmt.Sprintf("ord_%d", k)), ReceivedAt: time.Now()})
				}
			}
			rand.New(rand.NewSource(1)).Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			if _, err := a.Ingest(ctx, ds); err != nil {
				t.Fatal(err)
			}
			for _, p := range pools {
				p.Notify()
			}
		}
		ingest("")
		awaitAllDone(t, a, pools, 2*keys)
		checkOncePerKey(t, a, keys)

		res, err := a.Replay(ctx, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "orders"}, IncludeDone: true})
		if err != nil || len(res.Replayed) != 2*keys {
			t.Fatalf("replay: %d replayed, %v", len(res.Replayed), err)
		}
		for _, p := range pools {
			p.Notify()
		}
		awaitAllDone(t, a, pools, 2*keys)
		checkOncePerKey(t, a, keys)

		purgeDone(t, a, 2*keys)
		ingest("late-")
		awaitAllDone(t, a, pools, 2*keys)
		checkOncePerKey(t, a, keys)
	})
}

// awaitAllDone waits until the n events of source orders are all done
// (none dead), failing after 60 s.
func awaitAllDone(t *testing.T, s dbtest.Store, pools []*worker.Pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		evs, err := s.Events(context.Background(), hookbox.Filter{Source: "orders", Limit: 10 * n})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, e := range evs {
			switch e.Status {
			case hookbox.StatusDone:
				done++
			case hookbox.StatusDead:
				t.Fatalf("event %s is dead: %s", e.DeliveryID, e.LastError)
			}
		}
		if len(evs) == n && done == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events done after 60 s", done, len(evs))
		}
		for _, p := range pools {
			p.Notify()
		}
	}
}

// checkOncePerKey checks that each of the keys has exactly one effect,
// applied by the event whose claim effect_keys holds.
func checkOncePerKey(t *testing.T, s dbtest.Store, keys int) {
	t.Helper()
	var rows, distinct, mismatched, claimed int
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT key) FROM keyed`).Scan(&rows, &distinct); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = 'order'`).Scan(&claimed); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM keyed JOIN effect_keys k ON k.scope = 'order' AND k.key = keyed.key
            WHERE k.event_id IS NULL OR k.event_id <> keyed.event_id`).Scan(&mismatched)
	}); err != nil {
		t.Fatal(err)
	}
	if rows != keys || distinct != keys || claimed != keys || mismatched != 0 {
		t.Fatalf("effects: %d rows over %d keys, %d keys claimed, %d applied by another event than the claim's; want %d, %d, %d, 0",
			rows, distinct, claimed, mismatched, keys, keys, keys)
	}
}

// TestSendsOncePerKeyTwoPools: two pools on two stores of one database
// work pairs of events per key, in random order; each handler records
// the key's email (RecordSend), and a third of first attempts then fail,
// a third panic: each key has exactly one send however many runs
// recorded it, in however many transactions of two processes. Both pools
// perform sends; each send's first attempt fails after reaching the
// outside world, and is tried again with the same idempotency key.
// While one send's second attempt is in flight, Uncertain lists it, and
// it lists no send once all are done.
func TestSendsOncePerKeyTwoPools(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		a, b := dbtest.Open(t, dbURL), dbtest.Open(t, dbURL)
		const keys = 40
		var mu sync.Mutex
		calls := map[string][]string{} // send key → idempotency key of each call
		inFlight, release := make(chan struct{}), make(chan struct{})
		send := worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			calls[ev.DeliveryID] = append(calls[ev.DeliveryID], effect.IdempotencyKey(ev))
			mu.Unlock()
			switch {
			case ev.Attempts-ev.AttemptBase == 1:
				return errors.New("the mail server timed out after taking the mail")
			case ev.DeliveryID == "ord_0":
				close(inFlight)
				<-release
			}
			return nil
		})
		handler := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if _, err := effect.RecordSend(ctx, tx, "email", string(ev.Payload), ev.Payload); err != nil {
				return err
			}
			if ev.Attempts-ev.AttemptBase == 1 {
				switch ev.ID % 3 {
				case 0:
					return errors.New("fails after recording the send")
				case 1:
					panic("panics after recording the send")
				}
			}
			return nil
		}
		pol := worker.Policy{MaxAttempts: 100, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Timeout: 5 * time.Second}
		var pools []*worker.Pool
		for _, s := range []dbtest.Store{a, b} {
			p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond, BatchSize: 16, TxWorkers: 2})
			p.SetPolicy("orders", pol)
			p.SetPolicy(effect.SendSource("email"), pol)
			p.Handle("orders", "", handler)
			p.Route(effect.SendSource("email"), send)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			pools = append(pools, p)
			t.Cleanup(func() { p.Stop(context.Background()) })
		}
		var ds []hookbox.Delivery
		for k := range keys {
			for _, copy := range []string{"a", "b"} {
				ds = append(ds, hookbox.Delivery{Source: "orders", DeliveryID: fmt.Sprintf("%s-%d", copy, k),
					Payload: []byte(fmt.Sprintf("ord_%d", k)), ReceivedAt: time.Now()})
			}
		}
		rand.New(rand.NewSource(2)).Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		if _, err := a.Ingest(ctx, ds); err != nil {
			t.Fatal(err)
		}
		for _, p := range pools {
			p.Notify()
		}
		<-inFlight
		u, err := effect.Uncertain(ctx, a, "email")
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, e := range u {
			listed = listed || e.DeliveryID == "ord_0"
			if e.Attempts == 0 {
				t.Errorf("Uncertain listed %s, never attempted", e.DeliveryID)
			}
		}
		if !listed {
			t.Errorf("the send of ord_0, its attempt in flight, is not among the uncertain: %v", u)
		}
		close(release)
		awaitAllDone(t, a, pools, 2*keys)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			u, err := effect.Uncertain(ctx, a, "email")
			if err != nil {
				t.Fatal(err)
			}
			if len(u) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d sends still uncertain after 60 s", len(u))
			}
			for _, p := range pools {
				p.Notify()
			}
		}
		sends, err := a.Events(ctx, hookbox.Filter{Source: effect.SendSource("email"), Limit: 10 * keys})
		if err != nil {
			t.Fatal(err)
		}
		if len(sends) != keys {
			t.Errorf("%d sends recorded for %d keys, want one each", len(sends), keys)
		}
		mu.Lock()
		defer mu.Unlock()
		for k := range keys {
			key := fmt.Sprintf("ord_%d", k)
			c := calls[key]
			if len(c) != 2 || c[0] != c[1] || c[0] != "send:email:"+key {
				t.Errorf("send %s: calls with idempotency keys %v; want two, both send:email:%s", key, c, key)
			}
		}
	})
}
