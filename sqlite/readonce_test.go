package sqlite

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestEventPayloadReadOnce: reading an event of an 8 MiB payload, by
// Event or by a claim (which reads a large payload after its commit),
// allocates the payload once, not twice. Scanned into a *[]byte, the
// driver's copy of the blob was copied again by database/sql: 16 MiB
// allocated per 8 MiB read. The payloads read stay as stored after the
// next reads (the driver does not reuse the memory it handed over).
func TestEventPayloadReadOnce(t *testing.T) {
	const size = 8 << 20
	ctx := context.Background()
	s := openTemp(t)
	var ids []int64
	for i := range 2 {
		d := hookbox.Delivery{Source: "big", DeliveryID: string(rune('a' + i)), Payload: bigPayload(i, size), ReceivedAt: time.Now()}
		rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rs[0].ID)
	}
	// allocated returns the bytes the Go heap allocated while f ran.
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	const bound = size * 3 / 2
	var first hookbox.Event
	n := allocated(func() {
		var err error
		if first, err = s.Event(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Event: %.1f MiB allocated for a payload of %d MiB", float64(n)/(1<<20), size>>20)
	if n > bound {
		t.Errorf("Event allocated %.1f MiB to read a payload of %d MiB, over 1.5×: the payload was copied", float64(n)/(1<<20), size>>20)
	}
	var claimed []hookbox.Event
	n = allocated(func() {
		var err error
		if claimed, err = s.Claim(ctx, hookbox.ClaimParams{Owner: "big", Limit: 1, Lease: time.Minute, Sources: []string{"big"}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Claim: %.1f MiB allocated for a payload of %d MiB", float64(n)/(1<<20), size>>20)
	if n > bound {
		t.Errorf("a claim allocated %.1f MiB to read a payload of %d MiB, over 1.5×: the payload was copied", float64(n)/(1<<20), size>>20)
	}
	second, err := s.Event(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || !bytes.Equal(claimed[0].Payload, bigPayload(0, size)) {
		t.Errorf("the claim read %d events, not the first payload as stored", len(claimed))
	}
	if !bytes.Equal(first.Payload, bigPayload(0, size)) || !bytes.Equal(second.Payload, bigPayload(1, size)) {
		t.Error("a payload read is not as stored after the reads that followed it")
	}
}
