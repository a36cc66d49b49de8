package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// bigPayload is payload i of n bytes, unlike any other i's.
func bigPayload(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*7 + j%251)
	}
	return p
}

// TestLargePayloadsNotCopiedByClaimAndFinish: the claim and the finish of
// a batch of events with large payloads take SQLite memory for a payload
// or two at a time (the row being rewritten, the pages it goes through),
// not a copy of every payload of the batch. Under SQLite's default ABORT
// a statement over several rows journals each page it changes, payloads
// included, and a claim that RETURNed the payload buffered every one
// until its last row was read, inside the write transaction; at 20 MB
// bodies, 8 in flight, hookbox held about a gigabyte. Measured with
// SQLite's own count of what it allocates (memPeak), which depends only
// on the statements run and the rows they touch, and on how much of the
// writer's page cache is filled when they start: see coldWriterCache.
func TestLargePayloadsNotCopiedByClaimAndFinish(t *testing.T) {
	const n, size = 16, 2 << 20
	ctx := context.Background()
	s := openTemp(t)
	for i := range n {
		d := hookbox.Delivery{Source: "big", DeliveryID: fmt.Sprint(i), Payload: bigPayload(i, size), ReceivedAt: time.Now()}
		if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
			t.Fatal(err)
		}
	}
	// Half the batch's payloads: more than a claim or finish that copies
	// each one takes, more than twice what one that does not needs.
	const bound = n * size / 2
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

	coldWriterCache(t, s)
	before := memUsed()
	memPeak()
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "big", Limit: n, Lease: time.Minute, Sources: []string{"big"}})
	grew := memPeak() - before
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("claimed %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if !bytes.Equal(e.Payload, bigPayload(i, size)) {
			t.Fatalf("event %d: payload of %d bytes is not the one stored", e.ID, len(e.Payload))
		}
	}
	t.Logf("claim: SQLite held %s more at its peak (payloads: %d × %s)", mib(grew), n, mib(size))
	if grew > bound {
		t.Errorf("claiming %d events of %s took %s of SQLite memory at its peak, over %s: a copy of the payloads", n, mib(size), mib(grew), mib(bound))
	}

	outs := make([]hookbox.Outcome, len(evs))
	for i, e := range evs {
		outs[i] = hookbox.Outcome{ID: e.ID, Owner: e.LeaseOwner, Attempt: e.Attempts, Status: hookbox.StatusDone,
			StartedAt: time.Now(), FinishedAt: time.Now()}
	}
	evs = nil
	coldWriterCache(t, s)
	before = memUsed()
	memPeak()
	errs, err := s.Finish(ctx, outs)
	grew = memPeak() - before
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("outcome %d: %v", i, err)
		}
	}
	t.Logf("finish: SQLite held %s more at its peak", mib(grew))
	if grew > bound {
		t.Errorf("finishing %d events of %s took %s of SQLite memory at its peak, over %s: a copy of the payloads", n, mib(size), mib(grew), mib(bound))
	}
}

// measuredCacheKiB is the writer's page cache, in KiB, while a test
// measures SQLite's memory (memPeak): well under half a batch's payloads.
const measuredCacheKiB = 2048

// coldWriterCache empties the writer's page cache and bounds it to
// measuredCacheKiB, so that what memPeak counts next does not depend on
// how much of the cache was filled before. SQLite counts the page cache
// in the memory it holds, and the writer's (16 MiB, cache_size(-16384))
// was as large as the bound TestLargePayloadsNotCopiedByClaimAndFinish
// checks: a finish rewrites its rows through the cache, so a finish that
// found it emptied (1 run in 40: 20.9 MiB at its peak, against 6.1 MiB
// with a warm cache; always, 22.6 MiB, after PRAGMA shrink_memory) went
// over the bound with no payload copied. A copy of the payloads is not
// page cache and is still counted whole.
func coldWriterCache(t *testing.T, s *Store) {
	t.Helper()
	for _, q := range []string{fmt.Sprintf(`PRAGMA cache_size = -%d`, measuredCacheKiB), `PRAGMA shrink_memory`} {
		if _, err := s.writer.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestClaimByIDPlans: the statements a claim runs besides its pick find
// their rows by id: the pick's read of the payloads, the lease of the ids
// picked, and the read of the large payloads after the commit.
func TestClaimByIDPlans(t *testing.T) {
	s := openTemp(t)
	q, args := claimSQL(hookbox.ClaimParams{Owner: "o", Limit: 8, Lease: time.Minute, Sources: []string{"a", "b"}})
	noTableScan(t, s, "the pick", q, args...)
	noTableScan(t, s, "the lease", leaseSQL, "o", 1, 2, "[1,2,3]")
	noTableScan(t, s, "the read of large payloads", largeSQL, "[1,2,3]")
}

// TestListsReadNoPayload: listing events and planning a bulk replay read
// no payload. They asked "payload IS NULL", which SQLite answers by
// loading the value, one row after another: a page of 100 events of
// 32 MiB (the admin API's list, the console's, hookbox events list)
// read 3.2 GB, and a bulk replay read every payload it matched, each
// held whole in SQLite's memory as it went. length(payload) reads the
// size from the row's header. Measured with SQLite's own count of what
// it allocates (memPeak), after a first run has filled the page cache.
func TestListsReadNoPayload(t *testing.T) {
	const n, size = 8, 2 << 20
	ctx := context.Background()
	s := openTemp(t)
	for i := range n {
		d := hookbox.Delivery{Source: "big", DeliveryID: fmt.Sprint(i), Payload: bigPayload(i, size), ReceivedAt: time.Now()}
		if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
			t.Fatal(err)
		}
	}
	reads := map[string]func() error{
		"list": func() error {
			evs, err := s.Events(ctx, hookbox.Filter{Limit: 100})
			if err == nil && len(evs) != n {
				err = fmt.Errorf("listed %d events, want %d", len(evs), n)
			}
			return err
		},
		"bulk replay, dry run": func() error {
			res, err := s.Replay(ctx, hookbox.ReplayParams{Filter: hookbox.Filter{Source: "big"}, IncludeDone: true, DryRun: true})
			if err == nil && len(res.Replayed) != n {
				err = fmt.Errorf("would replay %d events, want %d", len(res.Replayed), n)
			}
			return err
		},
	}
	for what, read := range reads {
		if err := read(); err != nil { // fills the page cache
			t.Fatalf("%s: %v", what, err)
		}
		before := memUsed()
		memPeak()
		err := read()
		grew := memPeak() - before
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s of %d events of %d MiB: SQLite held %d KiB more at its peak", what, n, size>>20, grew>>10)
		if grew > size/2 {
			t.Errorf("%s of %d events took %d KiB of SQLite memory at its peak: it read a payload of %d KiB", what, n, grew>>10, size>>10)
		}
	}
}
