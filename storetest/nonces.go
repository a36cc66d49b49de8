package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// nonceTests are the cases of hookbox.NonceStore, run by Run.
var nonceTests = map[string]func(*testing.T, hookbox.Store){
	"NonceOnceWithOneBody":     testNonceOnceWithOneBody,
	"NonceSameBodyKeepsLonger": testNonceSameBodyKeepsLonger,
	"NonceConcurrentUses":      testNonceConcurrentUses,
	"NonceForgetsExpired":      testNonceForgetsExpired,
}

// nonceAt is a nonce of source s with body text body, held until exp and
// judged at now.
func nonceAt(source, value, body string, exp, now time.Time) hookbox.Nonce {
	sum := sha256.Sum256([]byte(body))
	return hookbox.Nonce{Source: source, Value: value, BodySHA256: sum[:], Expires: exp, Now: now}
}

func useNonce(t *testing.T, s hookbox.Store, n hookbox.Nonce) bool {
	t.Helper()
	ok, err := s.UseNonce(context.Background(), n)
	if err != nil {
		t.Fatalf("UseNonce: %v", err)
	}
	return ok
}

// testNonceOnceWithOneBody: a nonce is accepted with the body it first
// came with, as often as it comes, and refused with any other until it
// expires; then the next body to come with it takes it over. Sources do
// not share nonces.
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
		{nonceAt("mg", "tok1", "body B", exp, exp.Add(-time.Millisecond)), false, "another body just before the expiry"},
		{nonceAt("mg", "tok1", "body B", exp.Add(5*time.Minute), exp), true, "another body at the expiry"},
		{nonceAt("mg", "tok1", "body A", exp.Add(5*time.Minute), exp.Add(time.Second)), false, "the first body after the second took over"},
	}
	for _, st := range steps {
		if got := useNonce(t, s, st.n); got != st.want {
			t.Fatalf("%s: UseNonce = %v, want %v", st.what, got, st.want)
		}
	}
}

// testNonceSameBodyKeepsLonger: a second use with the same body and a
// later expiry keeps the nonce until the later one (a re-check admits a
// delivery long after its signature expired); an earlier expiry does not
// shorten it.
func testNonceSameBodyKeepsLonger(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(time.Minute), now))
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(time.Hour), now))
	useNonce(t, s, nonceAt("mg", "tok", "A", now.Add(2*time.Minute), now))
	if useNonce(t, s, nonceAt("mg", "tok", "B", now.Add(2*time.Hour), now.Add(30*time.Minute))) {
		t.Fatal("another body half an hour on was accepted: the later expiry was not kept")
	}
	if !useNonce(t, s, nonceAt("mg", "tok", "B", now.Add(2*time.Hour), now.Add(time.Hour))) {
		t.Fatal("another body at the later expiry was refused")
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
			got[i], errs[i] = s.UseNonce(context.Background(), nonceAt("mg", "contested", fmt.Sprint(i%2), now.Add(time.Minute), now))
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
	later := now.Add(2 * time.Minute)
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
