package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestNonceLockedRowFailsTheBatch: a nonce whose row another session holds
// (a process whose connection stalled before its commit) fails the batch
// after lock_timeout instead of holding every delivery with a nonce until
// the holder goes away.
func TestNonceLockedRowFailsTheBatch(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	n := hookbox.Nonce{Source: "mg", Value: "held", BodySHA256: make([]byte, 32), Signed: time.Now(), Now: time.Now()}
	key := n.Key()
	if _, err := tx.Exec(ctx, `INSERT INTO nonces (nonce_sha256, body_sha256, source, signed_at) VALUES ($1, $2, 'mg', now())`, key[:], n.BodySHA256); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.UseNonces(wait, []hookbox.Nonce{n}); !errors.Is(err, hookbox.ErrUnavailable) || wait.Err() != nil {
		t.Fatalf("UseNonces on a row another session holds: %v (context: %v); want the lock timeout's error, unavailable", err, wait.Err())
	}
	tx.Rollback(ctx)
	if ok, err := s.UseNonces(ctx, []hookbox.Nonce{n}); err != nil || !ok[0] {
		t.Fatalf("UseNonces once the row is free: %v, %v", ok, err)
	}
}

// TestNonceSweptByDatabaseClock: hosts whose clocks disagree share the
// database. Host B, whose clock is right, accepts a Mailgun token signed
// 56 minutes ago (within the 1 h tolerance); host A, whose clock is 10
// minutes ahead, then judges another delivery. A's sweep forgot nonces
// signed NonceKeep before its own clock, 55 minutes ago by B's, B's token
// among them, and the token with another body was then accepted at B: a
// replay. The cut-off is now on the database's clock.
func TestNonceSweptByDatabaseClock(t *testing.T) {
	s := open(t, pgtest.ClockURL(t, -10*time.Minute)) // this process is host A
	ctx := context.Background()
	aNow := time.Now()
	bNow := aNow.Add(-10 * time.Minute) // the database's clock, and B's
	signed := bNow.Add(-56 * time.Minute)
	use := func(value, body string, signed, now time.Time) bool {
		t.Helper()
		sum := sha256.Sum256([]byte(body))
		ok, err := s.UseNonces(ctx, []hookbox.Nonce{{Source: "mg", Value: value, BodySHA256: sum[:], Signed: signed, Now: now}})
		if err != nil {
			t.Fatal(err)
		}
		return ok[0]
	}
	if !use("token-1", "b1", signed, bNow) {
		t.Fatal("the first use of token-1 was refused")
	}
	for i := range 3 {
		use(fmt.Sprint("token-a", i), "x", aNow, aNow)
	}
	if use("token-1", "b2", signed, bNow.Add(time.Second)) {
		t.Error("token-1 with another body was accepted after a host 10 minutes ahead swept it: a replay let through")
	}
}
