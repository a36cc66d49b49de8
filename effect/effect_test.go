package effect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestUncertainAfterCrash: a send whose attempt started but never finished
// (the worker died between sending and marking it sent) is listed as
// uncertain until a later attempt confirms it.
func TestUncertainAfterCrash(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.RecordSend(ctx, tx, "email", "ord_7", []byte(`{}`))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "dies", Limit: 1, Lease: time.Minute,
			Sources: []string{effect.SendSource("email")}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v %v", evs, err)
		}
		u, err := effect.Uncertain(ctx, s, "email")
		if err != nil || len(u) != 1 || u[0].DeliveryID != "ord_7" {
			t.Fatalf("uncertain = %v, %v", u, err)
		}
		now := time.Now()
		errs, err := s.Finish(ctx, []hookbox.Outcome{{ID: evs[0].ID, Owner: "dies", Attempt: 1,
			Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		if u, _ := effect.Uncertain(ctx, s, "email"); len(u) != 0 {
			t.Fatalf("a confirmed send is still uncertain: %v", u)
		}
	})
}

// uncertainBacklog is more sends than the 10,000 one status query of an
// earlier Uncertain read, so a listing that does not page past them loses
// the older sends behind them.
const uncertainBacklog = 10_001

// TestUncertainBehindBacklog: a send whose attempt failed (pending, retry
// scheduled) stays uncertain however many newer, never attempted sends of
// its kind queue up behind it. Proves Uncertain reads past the first
// 10,000 pending sends instead of losing the oldest (the crashed one).
func TestUncertainBehindBacklog(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		recordSends(t, s, "email", "ord_1")
		attempt(t, s, "email", 1, hookbox.StatusPending)
		storeSends(t, s, "email", "later_", uncertainBacklog)
		u, err := effect.Uncertain(ctx, s, "email")
		if err != nil || len(u) != 1 || u[0].DeliveryID != "ord_1" {
			t.Fatalf("uncertain = %d sends (%v), want ord_1 alone", len(u), err)
		}
	})
}

// TestUncertainListsEveryDeadSend: with more dead sends than one query of
// the earlier Uncertain read, every one of them is listed, once.
func TestUncertainListsEveryDeadSend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		storeSends(t, s, "email", "ord_", uncertainBacklog)
		attempt(t, s, "email", uncertainBacklog, hookbox.StatusDead)
		u, err := effect.Uncertain(ctx, s, "email")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range u {
			seen[e.DeliveryID] = true
		}
		if len(u) != uncertainBacklog || len(seen) != uncertainBacklog {
			t.Fatalf("uncertain = %d sends, %d distinct, want %d", len(u), len(seen), uncertainBacklog)
		}
	})
}

// TestUncertainOnlyItsKind: Uncertain("email") lists sends of kind "email"
// only, not the rows of queue "send:email/eu" (which the store's source
// filter counts as the deliveries of "send:email", and which data recorded
// before kinds were checked may hold: a kind "email/eu"). Stores now refuse
// such a source, so the row is written as an older RecordSend wrote it.
func TestUncertainOnlyItsKind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		legacySends(t, s, effect.SendSource("email")+"/eu", "ord_9")
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute,
			Sources: []string{effect.SendSource("email") + "/eu"}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v %v", evs, err)
		}
		if u, err := effect.Uncertain(ctx, s, "email"); err != nil || len(u) != 0 {
			t.Fatalf("uncertain(email) = %v, %v; want none", u, err)
		}
		if u, err := effect.Uncertain(ctx, s, "email/eu"); err != nil || len(u) != 1 {
			t.Fatalf("uncertain(email/eu) = %v, %v; want ord_9", u, err)
		}
	})
}

// TestSendKindChecked: a kind with ':' or '/' is refused where it enters,
// since it would make two sends' IdempotencyKeys equal ("a" with key "b:c"
// and "a:b" with key "c") or read as another kind's target delivery.
func TestSendKindChecked(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	ctx := context.Background()
	for _, kind := range []string{"", "a:b", "a/b"} {
		err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.RecordSend(ctx, tx, kind, "c", nil)
			return err
		})
		if err == nil {
			t.Errorf("RecordSend accepted kind %q", kind)
		}
	}
	for _, kind := range []string{"a:b", "a/b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SendSource(%q) did not panic", kind)
				}
			}()
			effect.SendSource(kind)
		}()
	}
	if got := effect.SendSource(""); got != "send:" {
		t.Errorf("SendSource(\"\") = %q", got)
	}
}

// recordSends records a send of kind for each key, in one transaction.
// storeSends stores n sends of kind, keyed prefix and a number, as
// RecordSend leaves them (never attempted), through the store's ingest: a
// backlog of ten thousand recorded one by one took most of this package's
// time under the race detector.
func storeSends(t *testing.T, s dbtest.Store, kind, prefix string, n int) {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	// In slices: one statement of 10,000 rows can pass PostgreSQL's
	// step limit (1.5 s) on a loaded machine.
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		legacySends(t, s, effect.SendSource(kind), keys[:n]...)
		keys = keys[n:]
	}
}

// legacySends writes what an older hookbox's RecordSend wrote, at once for
// each key: the send's event, of source, with no key in effect_keys (and
// no check of its kind). The stores' Ingest refuses such a source
// (hookbox.CheckStorable).
func legacySends(t *testing.T, s dbtest.Store, source string, keys ...string) {
	t.Helper()
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		q := `WITH d AS (INSERT INTO event_data (source, delivery_id, payload, created_at)
                SELECT $1, k, $3, now() FROM unnest($2::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n RETURNING id)
            INSERT INTO queue (id, source, next_attempt_at, updated_at) SELECT id, $1, now(), now() FROM d`
		args := []any{source, keys, []byte(`{}`)}
		if tx.Dialect == hookbox.DialectSQLite {
			b, err := json.Marshal(keys)
			if err != nil {
				return err
			}
			q = `INSERT INTO events (source, delivery_id, payload, next_attempt_at, created_at, updated_at)
                SELECT $1, value, $3, $4, $4, $4 FROM json_each($2) ORDER BY key`
			args = []any{source, string(b), []byte(`{}`), time.Now().UnixMilli()}
		}
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func recordSends(t *testing.T, s dbtest.Store, kind string, keys ...string) {
	t.Helper()
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		for _, k := range keys {
			if _, err := effect.RecordSend(ctx, tx, kind, k, []byte(`{}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// attempt claims n sends of kind (the oldest) and finishes each attempt
// with status: pending (to retry in an hour) or dead.
func attempt(t *testing.T, s dbtest.Store, kind string, n int, status hookbox.Status) {
	t.Helper()
	ctx := context.Background()
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: n, Lease: time.Minute,
		Sources: []string{effect.SendSource(kind)}})
	if err != nil || len(evs) != n {
		t.Fatalf("claim: %d of %d, %v", len(evs), n, err)
	}
	now := time.Now()
	outs := make([]hookbox.Outcome, n)
	for i, e := range evs {
		outs[i] = hookbox.Outcome{ID: e.ID, Owner: "w", Attempt: e.Attempts, Status: status,
			RetryAt: now.Add(time.Hour), Error: "failed", StartedAt: now, FinishedAt: now}
	}
	errs, err := s.Finish(ctx, outs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			t.Fatal(e)
		}
	}
}

// TestRecordSendAfterPurge: on both stores, a send already performed is not
// recorded again for its key after retention purged its queue row (a
// second event about the same order weeks later, or a redelivery after the
// purge): the key is remembered in effect_keys, which is never purged.
func TestRecordSendAfterPurge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if !recordSend(t, s, "email", "ord_1") {
			t.Fatal("the first record of ord_1 was refused")
		}
		attempt(t, s, "email", 1, hookbox.StatusDone)
		purgeDone(t, s, 1)
		if recordSend(t, s, "email", "ord_1") {
			t.Error("the send for ord_1, already performed, was recorded (and will be performed) again after a purge")
		}
		if !recordSend(t, s, "sms", "ord_1") {
			t.Error("a send of another kind for ord_1 was refused")
		}
		if evs, err := s.Events(ctx, hookbox.Filter{Source: effect.SendSource("email")}); err != nil || len(evs) != 0 {
			t.Errorf("email sends after the purge: %v, %v; want none", evs, err)
		}
	})
}

// TestRecordSendRecordedBeforeKeys: a send recorded before RecordSend
// claimed keys (a queue row, no effect_keys row) still holds its key while
// its row exists, and from then on the key holds it after a purge.
func TestRecordSendRecordedBeforeKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		legacySends(t, s, effect.SendSource("email"), "ord_2")
		if recordSend(t, s, "email", "ord_2") {
			t.Fatal("a send queued before the upgrade was recorded again")
		}
		attempt(t, s, "email", 1, hookbox.StatusDone)
		purgeDone(t, s, 1)
		if recordSend(t, s, "email", "ord_2") {
			t.Error("a send queued before the upgrade was recorded again after its purge")
		}
	})
}

// TestRecordSendRecordedBeforeKeysThenPurged: a send recorded with no
// key (by an older hookbox still running during an upgrade, after the
// migration that gave existing sends their keys) and purged once done,
// with no RecordSend for its key in between, is not recorded again: the
// purge claims the key of each send it deletes.
func TestRecordSendRecordedBeforeKeysThenPurged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		legacySends(t, s, effect.SendSource("email"), "ord_3") // no key
		attempt(t, s, "email", 1, hookbox.StatusDone)
		purgeDone(t, s, 1)
		if recordSend(t, s, "email", "ord_3") {
			t.Error("a send recorded without a key was recorded (and will be performed) again after its purge")
		}
	})
}

// TestClaimKeyRefusesSendScopes: ClaimKey refuses the scopes RecordSend
// keeps its keys under, so a handler's key cannot stop a send, nor a send
// a handler's key.
func TestClaimKeyRefusesSendScopes(t *testing.T) {
	s := dbtest.Open(t, dbtest.SQLiteURL(t))
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		_, err := effect.ClaimKey(ctx, tx, nil, effect.SendSource("email"), "ord_1")
		return err
	})
	if err == nil {
		t.Error("ClaimKey accepted the scope send:email")
	}
}

// recordSend records a send of kind for key in its own transaction and
// reports whether it was the first record.
func recordSend(t *testing.T, s dbtest.Store, kind, key string) bool {
	t.Helper()
	var first bool
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		var err error
		first, err = effect.RecordSend(ctx, tx, kind, key, []byte(`{}`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// purgeDone purges finished events until n are deleted, as retention would
// weeks later: the cut-off must pass their last change, which the store
// stamps with its own clock.
func purgeDone(t *testing.T, s dbtest.Store, n int) {
	t.Helper()
	ops, ok := s.(hookbox.Ops)
	if !ok {
		t.Fatalf("store %T has no Ops", s)
	}
	// A newer event: a store may keep the newest from a purge (SQLite does).
	if _, err := s.Ingest(context.Background(), []hookbox.Delivery{{Source: "newer", DeliveryID: "newer",
		Payload: []byte(`{}`), ReceivedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	done := 0
	for done < n {
		res, err := ops.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		done += res.Done
		if time.Now().After(deadline) {
			t.Fatalf("purged %d of %d done events", done, n)
		}
	}
}

// TestSendFromHostAheadDueAtOnce: a send recorded by a handler on a host
// whose clock is 10 minutes ahead of the PostgreSQL server's is due at
// once by the server's clock; it was due at the host's now, 10 minutes in
// the server's future, and waited that long.
func TestSendFromHostAheadDueAtOnce(t *testing.T) {
	s := dbtest.Open(t, pgtest.ClockURL(t, -10*time.Minute))
	ctx := context.Background()
	if !recordSend(t, s, "email", "ord_9") {
		t.Fatal("the send was not recorded")
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute, Sources: []string{effect.SendSource("email")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		all, _ := s.Events(ctx, hookbox.Filter{Source: effect.SendSource("email")})
		t.Errorf("a claim right after the send was recorded took %d sends, want 1 (stored: %+v)", len(evs), all)
	}
}

// rowCounter is a store whose listings count the rows they return.
type rowCounter struct {
	dbtest.Store
	rows int
}

func (c *rowCounter) Events(ctx context.Context, f hookbox.Filter) ([]hookbox.Event, error) {
	evs, err := c.Store.Events(ctx, f)
	c.rows += len(evs)
	return evs, err
}

// TestUncertainUpToBounded: UncertainUpTo lists the newest max uncertain
// sends, those Uncertain lists first, says there are more, and reads a
// page of them, not every one; with a bound above their number it lists
// them all and says there are no more. The sends are pending (retrying),
// processing and dead, newer never-attempted ones among them.
func TestUncertainUpToBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		storeSends(t, s, "email", "dead_", 2500)
		attempt(t, s, "email", 2500, hookbox.StatusDead)
		storeSends(t, s, "email", "retry_", 30)
		attempt(t, s, "email", 30, hookbox.StatusPending)
		storeSends(t, s, "email", "new_", 20)
		all, err := effect.Uncertain(ctx, s, "email")
		if err != nil || len(all) != 2530 {
			t.Fatalf("Uncertain = %d sends, %v; want 2530", len(all), err)
		}
		c := &rowCounter{Store: s}
		got, more, err := effect.UncertainUpTo(ctx, c, "email", 50)
		if err != nil || !more || len(got) != 50 {
			t.Fatalf("UncertainUpTo(50) = %d sends, more %v, %v; want 50 and more", len(got), more, err)
		}
		for i := range got {
			if got[i].ID != all[i].ID || got[i].Status != all[i].Status {
				t.Fatalf("UncertainUpTo(50)[%d] = %d %s, Uncertain's = %d %s", i, got[i].ID, got[i].Status, all[i].ID, all[i].Status)
			}
		}
		if c.rows > 1100 {
			t.Errorf("UncertainUpTo(50) read %d rows of 2550; want one page of each status", c.rows)
		}
		got, more, err = effect.UncertainUpTo(ctx, s, "email", 2530)
		if err != nil || more || len(got) != 2530 {
			t.Fatalf("UncertainUpTo(2530) = %d sends, more %v, %v; want all 2530, no more", len(got), more, err)
		}
		if _, _, err := effect.UncertainUpTo(ctx, s, "email", 0); err == nil {
			t.Error("UncertainUpTo(0) accepted")
		}
	})
}
