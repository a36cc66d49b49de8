package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// payloadSizes are the payload sizes testClaimReturnsEveryPayload stores:
// empty, small, at and just past the 64 KiB a SQLite claim reads inside
// its transaction, and well past it.
var payloadSizes = []int{0, 10, 64 << 10, 64<<10 + 1, 300 << 10, 1 << 20}

// sizedPayload is a payload of n bytes that differs from any other seed's.
func sizedPayload(seed, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(seed*31 + j%253)
	}
	return p
}

// checkPayloads fails the test unless each event in evs has the payload
// want gives for its delivery id: the bytes stored, an empty one as zero
// bytes (not nil), none cleared.
func checkPayloads(t *testing.T, what string, evs []hookbox.Event, want map[string][]byte) {
	t.Helper()
	for _, e := range evs {
		w, ok := want[e.DeliveryID]
		switch {
		case !ok:
			t.Errorf("%s: event %d (%s) was not asked for", what, e.ID, e.DeliveryID)
		case e.PayloadCleared:
			t.Errorf("%s: event %d (%d bytes stored) came back with its payload cleared", what, e.ID, len(w))
		case e.Payload == nil:
			t.Errorf("%s: event %d (%d bytes stored) came back with a nil payload", what, e.ID, len(w))
		case !bytes.Equal(e.Payload, w):
			t.Errorf("%s: event %d came back with %d bytes, not the %d stored", what, e.ID, len(e.Payload), len(w))
		}
	}
}

// testClaimReturnsEveryPayload: what a claim or a pick returns carries each
// event's payload as stored, whatever its size (a SQLite claim reads the
// large ones after its commit): in a plain claim, in a claim by key that
// wraps around its keys (two statements), in a claim over more sources
// than one SQLite statement walks (several parts), and in a pick.
func testClaimReturnsEveryPayload(t *testing.T, q QueueStore) {
	ctx := context.Background()

	// A plain claim.
	want := map[string][]byte{}
	var ds []hookbox.Delivery
	for i, n := range payloadSizes {
		d := Delivery("pay", fmt.Sprint(i))
		d.Payload = sizedPayload(i, n)
		want[d.DeliveryID] = d.Payload
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	evs := claim(t, q, time.Now(), 100, "pay")
	if len(evs) != len(ds) {
		t.Fatalf("claimed %d events, want %d", len(evs), len(ds))
	}
	for _, e := range evs {
		if e.Status != hookbox.StatusProcessing || e.LeaseOwner == "" || e.Attempts != 1 {
			t.Errorf("event %d claimed as %s, owner %q, attempt %d; want processing, leased, attempt 1", e.ID, e.Status, e.LeaseOwner, e.Attempts)
		}
	}
	checkPayloads(t, "claim", evs, want)

	// A pick, in a transaction of Go handlers.
	ds = ds[:0]
	for i, n := range payloadSizes {
		d := Delivery("picked", fmt.Sprint(i))
		d.Payload = sizedPayload(100+i, n)
		ds = append(ds, d)
	}
	want = map[string][]byte{}
	for _, d := range ds {
		want[d.DeliveryID] = d.Payload
	}
	ingest(t, q, ds...)
	w, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	picked, _, err := w.Pick(ctx, hookbox.ClaimParams{Limit: 100, Sources: []string{"picked"}})
	if rerr := w.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || len(picked) != len(ds) {
		t.Fatalf("picked %d events, %v; want %d", len(picked), err, len(ds))
	}
	checkPayloads(t, "pick", picked, want)

	// A claim by key that wraps around: after k2, it takes k3 and k4, then
	// k1 and k2.
	want = map[string][]byte{}
	ds = ds[:0]
	for i, n := range []int{1 << 20, 10, 300 << 10, 0} {
		d := fanOut("bykey", fmt.Sprint(i), fmt.Sprintf("t=k%d", i+1))
		d.Payload = sizedPayload(200+i, n)
		want[d.DeliveryID] = d.Payload
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	evs, err = q.Claim(ctx, hookbox.ClaimParams{Owner: "payload-bykey", Limit: 10, Lease: time.Minute,
		Sources: []string{"bykey/t"}, ByKey: true, AfterKey: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(ds) {
		t.Fatalf("claimed %d events by key, want %d", len(evs), len(ds))
	}
	checkPayloads(t, "claim by key", evs, want)

	// A claim over 450 sources: in two parts on SQLite.
	want = map[string][]byte{}
	ds = ds[:0]
	var sources []string
	for i := range 450 {
		src := fmt.Sprint("paysrc-", i)
		sources = append(sources, src)
		d := Delivery(src, fmt.Sprint("d", i))
		n := payloadSizes[i%3] // empty, small, 64 KiB
		if i%75 == 0 {
			n = payloadSizes[3+i/75%3] // past 64 KiB, in both parts
		}
		d.Payload = sizedPayload(300+i, n)
		want[d.DeliveryID] = d.Payload
		ds = append(ds, d)
	}
	if _, err := IngestBySize(t, q, ds, 2<<20); err != nil { // 12 MiB in all
		t.Fatalf("Ingest: %v", err)
	}
	evs = claim(t, q, time.Now(), 1000, sources...)
	if len(evs) != len(ds) {
		t.Fatalf("claimed %d events of %d sources, want %d", len(evs), len(sources), len(ds))
	}
	checkPayloads(t, "claim of 450 sources", evs, want)
}

// payloadTotal is the sum of the payload sizes of evs.
func payloadTotal(evs []hookbox.Event) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e.Payload))
	}
	return n
}

// testClaimWithinPayloadBudget: a claim or a pick with MaxPayloadBytes
// returns the events, in id order, up to the first whose payload would
// bring the total past it, the first event whatever its size: in a plain
// claim, one leaving running events out, a pick, a claim by key that
// wraps around (its second statement takes what the first left of the
// budget, no event when it left too little) and a claim over more
// sources than one SQLite statement walks. Before the bound, each took
// every event due up to its Limit: 256 payloads of 32 MiB were 8 GiB.
func testClaimWithinPayloadBudget(t *testing.T, q QueueStore) {
	ctx := context.Background()
	const kib = 1 << 10
	check := func(what string, evs []hookbox.Event, err error, wantN int, budget int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(evs) != wantN {
			t.Errorf("%s: took %d events, %d payload bytes; want %d events within %d bytes", what, len(evs), payloadTotal(evs), wantN, budget)
		}
		if n := payloadTotal(evs); len(evs) > 1 && n > budget {
			t.Errorf("%s: took %d payload bytes in %d events, past the budget of %d", what, n, len(evs), budget)
		}
	}
	params := func(limit int, budget int64, sources ...string) hookbox.ClaimParams {
		return hookbox.ClaimParams{Owner: fmt.Sprint("budget-", claimSeq.Add(1)), Limit: limit, Lease: time.Minute,
			Sources: sources, MaxPayloadBytes: budget}
	}

	// A plain claim: 300 KiB each, 700 KiB allowed: two. Then 100 KiB
	// allowed: the first is taken whatever its size, alone.
	var ds []hookbox.Delivery
	for i := range 5 {
		d := Delivery("budget", fmt.Sprint(i))
		d.Payload = sizedPayload(i, 300*kib)
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	evs, err := q.Claim(ctx, params(100, 700*kib, "budget"))
	check("claim of 700 KiB", evs, err, 2, 700*kib)
	evs, err = q.Claim(ctx, params(100, 100*kib, "budget"))
	check("claim of 100 KiB", evs, err, 1, 100*kib)
	if len(evs) == 0 {
		t.FailNow()
	}
	// Leaving out events it runs (another statement on PostgreSQL).
	p := params(100, 300*kib, "budget")
	p.RunningIDs = []int64{evs[0].ID}
	evs, err = q.Claim(ctx, p)
	check("claim of 300 KiB leaving running events out", evs, err, 1, 300*kib)
	evs, err = q.Claim(ctx, params(100, 0, "budget"))
	check("claim without a budget", evs, err, 1, 1<<40)

	// A pick, in a transaction of Go handlers.
	ds = ds[:0]
	for i := range 5 {
		d := Delivery("budget-pick", fmt.Sprint(i))
		d.Payload = sizedPayload(10+i, 300*kib)
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	w, err := q.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	picked, _, err := w.Pick(ctx, params(100, 900*kib, "budget-pick"))
	if rerr := w.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	check("pick of 900 KiB", picked, err, 3, 900*kib)

	// A claim by key that wraps around: after k2, k3 and k4 take 600 KiB of
	// the 700; the wrap-around, to k1 and k2, takes nothing.
	ds = ds[:0]
	for i := range 4 {
		d := fanOut("budget-key", fmt.Sprint(i), fmt.Sprintf("t=k%d", i+1))
		d.Payload = sizedPayload(20+i, 300*kib)
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	p = params(10, 700*kib, "budget-key/t")
	p.ByKey, p.AfterKey = true, "k2"
	evs, err = q.Claim(ctx, p)
	check("claim by key of 700 KiB", evs, err, 2, 700*kib)
	// With 900 KiB, the wrap-around takes k1 alone.
	p = params(10, 400*kib, "budget-key/t")
	p.ByKey, p.AfterKey = true, "k4"
	evs, err = q.Claim(ctx, p)
	check("claim by key of 400 KiB", evs, err, 1, 400*kib)

	// A claim over 450 sources (two parts on SQLite), 4 KiB each, 1 MiB
	// allowed: 256 of them.
	ds = ds[:0]
	var sources []string
	for i := range 450 {
		src := fmt.Sprint("budget-src-", i)
		sources = append(sources, src)
		d := Delivery(src, fmt.Sprint("d", i))
		d.Payload = sizedPayload(30+i, 4*kib)
		ds = append(ds, d)
	}
	ingest(t, q, ds...)
	evs, err = q.Claim(ctx, params(1000, 1<<20, sources...))
	check("claim of 450 sources within 1 MiB", evs, err, 256, 1<<20)
}
