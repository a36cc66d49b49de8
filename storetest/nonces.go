package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// nonceTests are the cases of hookbox.NonceStore, run by Run.
var nonceTests = map[string]func(*testing.T, hookbox.Store){
	"NonceOnceWithOneBody":  testNonceOnceWithOneBody,
	"NonceKeptForNonceKeep": testNonceKeptForNonceKeep,
	"NonceConcurrentUses":   testNonceConcurrentUses,
	"NonceForgetsExpired":   testNonceForgetsExpired,
	"NonceBatches":          testNonceBatches,
}

// nonceAt is a nonce of source with body text body, signed at signed and
// judged at now.
func nonceAt(source, value, body string, signed, now time.Time) hookbox.Nonce {
	sum := sha256.Sum256([]byte(body))
	return hookbox.Nonce{Source: source, Value: value, BodySHA256: sum[:], Signed: signed, Now: now}
}

func useNonce(t *testing.T, s hookbox.Store, n hookbox.Nonce) bool {
	t.Helper()
	ok, err := s.UseNonces(context.Background(), []hookbox.Nonce{n})
	if err != nil || len(ok) != 1 {
		t.Fatalf("UseNonces: %v, %v", ok, err)
	}
	return ok[0]
}

// testNonceOnceWithOneBody: a nonce is accepted with the body it first
// came with, as often as it comes, at any source, and refused with any
// other body, at any source (a signing key may serve several).
func testNonceOnceWithOneBody(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	steps := []struct {
		n    hookbox.Nonce
		want bool
		what string
	}{
		{nonceAt("mg", "tok1", "body A", now, now), true, "first use"},
		{nonceAt("mg", "tok1", "body A", now, now.Add(time.Second)), true, "the same request again"},
		{nonceAt("mg", "tok1", "body B", now, now.Add(2*time.Second)), false, "another body"},
		{nonceAt("other", "tok1", "body B", now, now), false, "another body at another source"},
		{nonceAt("other", "tok1", "body A", now, now), true, "the same body at another source"},
		{nonceAt("mg", "tok2", "body B", now, now), true, "another value"},
		// A value any bytes long, of any bytes: stores keep its hash.
		{nonceAt("mg", strings.Repeat("\x00\xff", 5000), "body A", now, now), true, "a value of 10,000 bytes that are not text"},
		{nonceAt("mg", strings.Repeat("\x00\xff", 5000), "body B", now, now), false, "the same with another body"},
	}
	for _, st := range steps {
		if got := useNonce(t, s, st.n); got != st.want {
			t.Fatalf("%s: UseNonces = %v, want %v", st.what, got, st.want)
		}
	}
}

// testNonceKeptForNonceKeep: a nonce is remembered until NonceKeep after
// its signed time, longer than any tolerance: uses judged later forget it
// only then. A signature judged in time whose body reached the store late,
// after such uses, still finds it.
func testNonceKeptForNonceKeep(t *testing.T, s hookbox.Store) {
	signed := time.Now().Truncate(time.Millisecond)
	useNonce(t, s, nonceAt("mg", "tok", "genuine", signed, signed))
	sweep := func(at time.Time) {
		for i := range 3 {
			useNonce(t, s, nonceAt("mg", fmt.Sprint("sweeper-", at.UnixMilli(), "-", i), "x", at, at))
		}
	}
	sweep(signed.Add(hookbox.NonceKeep - time.Second))
	if useNonce(t, s, nonceAt("mg", "tok", "forged", signed, signed.Add(time.Hour))) {
		t.Fatal("a forged body judged within the largest tolerance was accepted after uses a little before NonceKeep")
	}
	sweep(signed.Add(hookbox.NonceKeep + time.Second))
	if !useNonce(t, s, nonceAt("mg", "tok", "forged", signed, signed.Add(hookbox.NonceKeep+time.Second))) {
		t.Fatal("the nonce was not forgotten NonceKeep after its signed time")
	}
}

// testNonceConcurrentUses: uses of one value at once, with two bodies,
// accept one body only, and every use with that body.
func testNonceConcurrentUses(t *testing.T, s hookbox.Store) {
	const uses = 16
	now := time.Now().Truncate(time.Millisecond)
	var wg sync.WaitGroup
	got := make([]bool, uses)
	errs := make([]error, uses)
	for i := range uses {
		wg.Go(func() {
			var ok []bool
			ok, errs[i] = s.UseNonces(context.Background(), []hookbox.Nonce{nonceAt("mg", "contested", fmt.Sprint(i%2), now, now)})
			got[i] = errs[i] == nil && ok[0]
		})
	}
	wg.Wait()
	accepted := map[int]int{}
	for i := range uses {
		if errs[i] != nil {
			t.Fatalf("use %d: %v", i, errs[i])
		}
		if got[i] {
			accepted[i%2]++
		}
	}
	if len(accepted) != 1 || (accepted[0] != uses/2 && accepted[1] != uses/2) {
		t.Fatalf("accepted uses by body: %v; want every use of one body and none of the other", accepted)
	}
}

// testNonceForgetsExpired: uses forget expired nonces, a few each, so the
// store does not keep every nonce it ever saw.
func testNonceForgetsExpired(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	for i := range 10 {
		useNonce(t, s, nonceAt("mg", fmt.Sprint("old", i), "A", now, now))
	}
	later := now.Add(hookbox.NonceKeep + time.Second)
	for i := range 5 {
		useNonce(t, s, nonceAt("mg", fmt.Sprint("new", i), "A", later, later))
	}
	var n int
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM nonces`).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d nonces kept after 5 uses past the expiry of 10 others; want the 5 unexpired", n)
	}
}

// testNonceBatches: one call judges many nonces, entries of one nonce in
// order (the first body wins, within the call as across calls), and
// concurrent calls over the same nonces in different orders neither fail
// nor disagree.
func testNonceBatches(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	exp := now
	useNonce(t, s, nonceAt("mg", "stored", "X", exp, now))
	ok, err := s.UseNonces(ctx, []hookbox.Nonce{
		nonceAt("mg", "new", "A", exp, now),
		nonceAt("mg", "stored", "Y", exp, now),
		nonceAt("mg", "new", "B", exp, now),
		nonceAt("mg", "stored", "X", exp, now),
		nonceAt("other", "new", "B", exp, now),
		nonceAt("mg", "new", "A", exp, now),
	})
	want := []bool{true, false, false, true, false, true}
	if err != nil || fmt.Sprint(ok) != fmt.Sprint(want) {
		t.Fatalf("one batch: %v, %v; want %v", ok, err, want)
	}

	const callers, keys = 8, 40
	var wg sync.WaitGroup
	results := make([][]bool, callers)
	errs := make([]error, callers)
	for c := range callers {
		wg.Go(func() {
			ns := make([]hookbox.Nonce, keys)
			for k := range keys {
				j := (k*7 + c*13) % keys // each caller its own order
				ns[k] = nonceAt("mg", fmt.Sprint("shared-", j), fmt.Sprint("body-", j%3, "-", c%2), exp, now)
			}
			results[c], errs[c] = s.UseNonces(ctx, ns)
		})
	}
	wg.Wait()
	accepted := map[string]int{} // nonce → which caller parity's bodies won
	for c := range callers {
		if errs[c] != nil {
			t.Fatalf("caller %d: %v", c, errs[c])
		}
		for k, ok := range results[c] {
			j := (k*7 + c*13) % keys
			if ok {
				accepted[fmt.Sprint(j)] |= 1 << (c % 2)
			}
		}
	}
	for j := range keys {
		if v := accepted[fmt.Sprint(j)]; v != 1 && v != 2 {
			t.Fatalf("nonce %d: bodies of %b accepted; want one body", j, v)
		}
	}
}
