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
	"NonceOnceWithOneBody":     testNonceOnceWithOneBody,
	"NonceSameBodyKeepsLonger": testNonceSameBodyKeepsLonger,
	"NonceSlowSignature":       testNonceSlowSignatureAfterSweep,
	"NonceConcurrentUses":      testNonceConcurrentUses,
	"NonceForgetsExpired":      testNonceForgetsExpired,
	"NonceBatches":             testNonceBatches,
}

// nonceAt is a nonce of source s with body text body, held until exp and
// judged at now.
func nonceAt(source, value, body string, exp, now time.Time) hookbox.Nonce {
	sum := sha256.Sum256([]byte(body))
	return hookbox.Nonce{Source: source, Value: value, BodySHA256: sum[:], Expires: exp, Now: now}
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
// came with, as often as it comes, and refused with any other, past its
// expiry too (a signature judged in time may reach the store later), until
// it is forgotten NonceKeep after its expiry. Sources do not share nonces.
func testNonceOnceWithOneBody(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	exp := now.Add(5 * time.Minute)
	steps := []struct {
		n    hookbox.Nonce
		want bool
		what string
	}{
		{nonceAt("mg", "tok1", "body A", exp, now), true, "first use"},
		{nonceAt("mg", "tok1", "body A", exp, now.Add(time.Second)), true, "the same request again"},
		{nonceAt("mg", "tok1", "body B", exp, now.Add(2*time.Second)), false, "another body"},
		{nonceAt("other", "tok1", "body B", exp, now), true, "the same value at another source"},
		{nonceAt("mg", "tok2", "body B", exp, now), true, "another value"},
		{nonceAt("mg", "tok1", "body B", exp, exp.Add(time.Second)), false, "another body just past the expiry"},
		// Another use, past the margin of every nonce so far, forgets
		// them: tok1's row goes.
		{nonceAt("mg", "sweeper", "x", exp.Add(time.Hour), exp.Add(hookbox.NonceKeep+time.Second)), true, "a use that forgets the expired"},
		{nonceAt("mg", "tok1", "body B", exp.Add(time.Hour), exp.Add(hookbox.NonceKeep+2*time.Second)), true, "another body once tok1 is forgotten"},
		// A value any bytes long, of any bytes: stores keep its hash.
		{nonceAt("mg", strings.Repeat("\x00\xff", 5000), "body A", exp, now), true, "a value of 10,000 bytes that are not text"},
		{nonceAt("mg", strings.Repeat("\x00\xff", 5000), "body B", exp, now), false, "the same with another body"},
	}
	for _, st := range steps {
		if got := useNonce(t, s, st.n); got != st.want {
			t.Fatalf("%s: UseNonce = %v, want %v", st.what, got, st.want)
		}
	}
}

// testNonceSlowSignatureAfterSweep: a use judged before its nonce's
// expiry that reaches the store after other uses swept at the expiry
// (a body that took its time) still finds the nonce, and another body is
// refused.
func testNonceSlowSignatureAfterSweep(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	exp := now.Add(time.Minute)
	useNonce(t, s, nonceAt("mg", "tok", "genuine", exp, now))
	for i := range 3 {
		useNonce(t, s, nonceAt("mg", fmt.Sprint("later", i), "x", exp.Add(time.Hour), exp.Add(time.Duration(i+1)*time.Second)))
	}
	if useNonce(t, s, nonceAt("mg", "tok", "forged", exp, exp.Add(-time.Second))) {
		t.Fatal("a forged body judged before the expiry was accepted after sweeps at the expiry")
	}
}

// testNonceSameBodyKeepsLonger: a second use with the same body and a
// later expiry keeps the nonce until the later one (a source whose
// tolerance was raised); an earlier expiry does not shorten it.
func testNonceSameBodyKeepsLonger(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(time.Minute), now))
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(time.Hour), now))
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(2*time.Minute), now))
	past := now.Add(time.Minute + hookbox.NonceKeep + time.Second)
	useNonce(t, s, nonceAt("mg", "sweeper", "x", past.Add(time.Hour), past))
	if useNonce(t, s, nonceAt("mg", "tok", "B", past.Add(time.Hour), past)) {
		t.Fatal("another body past the first expiry was accepted: the later expiry was not kept")
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
			ok, errs[i] = s.UseNonces(context.Background(), []hookbox.Nonce{nonceAt("mg", "contested", fmt.Sprint(i%2), now.Add(time.Minute), now)})
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
		useNonce(t, s, nonceAt("mg", fmt.Sprint("old", i), "A", now.Add(time.Minute), now))
	}
	later := now.Add(time.Minute + hookbox.NonceKeep + time.Second)
	for i := range 5 {
		useNonce(t, s, nonceAt("mg", fmt.Sprint("new", i), "A", later.Add(time.Minute), later))
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
	exp := now.Add(time.Minute)
	useNonce(t, s, nonceAt("mg", "stored", "X", exp, now))
	ok, err := s.UseNonces(ctx, []hookbox.Nonce{
		nonceAt("mg", "new", "A", exp, now),
		nonceAt("mg", "stored", "Y", exp, now),
		nonceAt("mg", "new", "B", exp, now),
		nonceAt("mg", "stored", "X", exp, now),
		nonceAt("other", "new", "B", exp, now),
		nonceAt("mg", "new", "A", exp, now),
	})
	want := []bool{true, false, false, true, true, true}
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
