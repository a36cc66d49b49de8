// Package storetest is the conformance suite every hookbox.Store must pass.
// It is written once and run against SQLite and PostgreSQL, so a behaviour
// the product promises cannot hold on one database and not on the other.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// Opener returns a fresh, empty store for one test. The suite closes it.
type Opener func(t *testing.T) hookbox.Store

// Run runs the whole suite against the stores that open returns.
func Run(t *testing.T, open Opener) {
	tests := map[string]func(*testing.T, hookbox.Store){
		"IngestNewAndDuplicate":    testIngestNewAndDuplicate,
		"IngestRepeatsInOneBatch":  testIngestRepeatsInOneBatch,
		"IngestKeepsRawBytes":      testIngestKeepsRawBytes,
		"IngestScopesIDBySource":   testIngestScopesIDBySource,
		"IngestConcurrentSameID":   testIngestConcurrentSameID,
		"IngestConcurrentBatches":  testIngestConcurrentBatches,
		"EventNotFound":            testEventNotFound,
		"EventsFilter":             testEventsFilter,
		"ClosedStoreRefusesIngest": testClosedStoreRefusesIngest,
		"IngestTxAcrossAdds":       testIngestTxAcrossAdds,
		"IngestTxRollback":         testIngestTxRollback,
		"IngestBadDeliveryAlone":   testIngestBadDeliveryAlone,
		"IngestTxBadDelivery":      testIngestTxBadDelivery,
		"IngestRefusesBadOrderKey": testIngestRefusesBadOrderKey,
		"IngestStoresRefuseAlike":  testIngestStoresRefuseAlike,
		"IngestWithoutHeader":      testIngestWithoutHeader,
		"IngestSameBodyNewID":      testIngestSameBodyNewID,
		"IngestSameBodyInOneBatch": testIngestSameBodyInOneBatch,

		"IngestBatchRepeatOfDuplicate": testIngestBatchRepeatOfDuplicate,
		"IngestBatchesAsOneAtATime":    testIngestBatchesAsOneAtATime,
	}
	for _, more := range []map[string]func(*testing.T, hookbox.Store){rejectionTests, nonceTests, sessionTests} {
		for name, fn := range more {
			tests[name] = fn
		}
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

// Delivery builds a delivery with a small JSON body, for tests.
func Delivery(source, id string) hookbox.Delivery {
	return hookbox.Delivery{
		Source:     source,
		DeliveryID: id,
		EventType:  "test.event",
		Header:     http.Header{"Content-Type": {"application/json"}},
		Payload:    []byte(fmt.Sprintf(`{"id":%q}`, id)),
		ReceivedAt: time.Now(),
	}
}

func ingest(t *testing.T, s hookbox.Store, ds ...hookbox.Delivery) []hookbox.Receipt {
	t.Helper()
	rs, err := IngestRetried(t, s, ds)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if len(rs) != len(ds) {
		t.Fatalf("Ingest returned %d receipts for %d deliveries", len(rs), len(ds))
	}
	return rs
}

// IngestRetried stores ds as a sender would, sending them again, up to
// twice, when the store answers hookbox.ErrUnavailable: PostgreSQL's
// ingest gives up on a step the server has not answered within its
// bounds (about 1.5 s, plus time for the bytes), which a machine loaded
// by other tests can take, and a test that is not about ingest must not
// fail for it. Deliveries stored by the try that failed are duplicates
// in the next, with their receipts' ids. Each retry is logged.
func IngestRetried(t testing.TB, s hookbox.Store, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	t.Helper()
	rs, err := s.Ingest(context.Background(), ds)
	for try := 1; try <= 2 && errors.Is(err, hookbox.ErrUnavailable); try++ {
		t.Logf("ingest of %d deliveries unavailable (%v): sent again", len(ds), err)
		rs, err = s.Ingest(context.Background(), ds)
	}
	return rs, err
}

// IngestBySize stores ds as IngestRetried does, in calls of at most
// maxBytes of payload each (a larger delivery alone), and returns the
// receipts of all in order. For tests that store many large payloads:
// PostgreSQL bounds one ingest step by a time that grows with its bytes
// (see postgres.ingestContext), and under the race detector, on a
// loaded machine, the client's copies of ten megabytes alone took
// longer than that.
func IngestBySize(t testing.TB, s hookbox.Store, ds []hookbox.Delivery, maxBytes int) ([]hookbox.Receipt, error) {
	t.Helper()
	var out []hookbox.Receipt
	for len(ds) > 0 {
		n, size := 1, len(ds[0].Payload)
		for n < len(ds) && size+len(ds[n].Payload) <= maxBytes {
			size += len(ds[n].Payload)
			n++
		}
		rs, err := IngestRetried(t, s, ds[:n])
		if err != nil {
			return out, err
		}
		out, ds = append(out, rs...), ds[n:]
	}
	return out, nil
}

// ingestNewer stores one pending event, newer than every event before it.
// A store may keep the newest event from a purge (hookbox.Ops.Purge), so
// a test that wants every finished event purged stores one after them.
func ingestNewer(t *testing.T, s hookbox.Store) {
	t.Helper()
	ingest(t, s, Delivery("newer", "newer"))
}

func count(t *testing.T, s hookbox.Store, f hookbox.Filter) int {
	t.Helper()
	f.Limit = 1 << 30
	es, err := s.Events(context.Background(), f)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	return len(es)
}

func testIngestNewAndDuplicate(t *testing.T, s hookbox.Store) {
	first := ingest(t, s, Delivery("polar", "msg_1"), Delivery("polar", "msg_2"))
	if first[0].Duplicate || first[1].Duplicate || first[0].ID == first[1].ID {
		t.Fatalf("first receipts = %+v, want two new distinct ids", first)
	}
	again := ingest(t, s, Delivery("polar", "msg_3"), Delivery("polar", "msg_1"))
	if again[0].Duplicate {
		t.Errorf("msg_3 reported duplicate")
	}
	if !again[1].Duplicate || again[1].ID != first[0].ID {
		t.Errorf("msg_1 again = %+v, want duplicate of id %d", again[1], first[0].ID)
	}
	if n := count(t, s, hookbox.Filter{}); n != 3 {
		t.Errorf("rows = %d, want 3", n)
	}
}

func testIngestRepeatsInOneBatch(t *testing.T, s hookbox.Store) {
	rs := ingest(t, s,
		Delivery("github", "a"), Delivery("github", "b"), Delivery("github", "a"),
		Delivery("github", "a"), Delivery("stripe", "a"))
	if rs[0].Duplicate || rs[1].Duplicate || rs[4].Duplicate {
		t.Errorf("first copies must be new: %+v", rs)
	}
	for _, i := range []int{2, 3} {
		if !rs[i].Duplicate || rs[i].ID != rs[0].ID {
			t.Errorf("receipt %d = %+v, want duplicate of %d", i, rs[i], rs[0].ID)
		}
	}
	if n := count(t, s, hookbox.Filter{}); n != 3 {
		t.Errorf("rows = %d, want 3", n)
	}
}

func testIngestKeepsRawBytes(t *testing.T, s hookbox.Store) {
	body := []byte("{\"b\": 1,  \"a\":\"\\u00e9\"}\r\n\x00\xff\xfe")
	d := Delivery("raw", "r1")
	d.Payload = body
	d.IDIsHash = true
	d.Header = http.Header{"Webhook-Signature": {"v1,abc v1,def"}, "X-Multi": {"1", "2"}}
	rs := ingest(t, s, d)
	e, err := s.Event(context.Background(), rs[0].ID)
	if err != nil {
		t.Fatalf("Event: %v", err)
	}
	if !bytes.Equal(e.Payload, body) {
		t.Errorf("payload = %q, want %q", e.Payload, body)
	}
	if !e.IDIsHash || e.Source != "raw" || e.DeliveryID != "r1" || e.EventType != "test.event" {
		t.Errorf("event fields = %+v", e)
	}
	if e.Status != hookbox.StatusPending || e.Attempts != 0 {
		t.Errorf("status = %s attempts = %d, want pending 0", e.Status, e.Attempts)
	}
	if got := e.Header.Values("X-Multi"); len(got) != 2 || got[1] != "2" {
		t.Errorf("headers = %v", e.Header)
	}
	if e.CreatedAt.IsZero() || time.Since(e.CreatedAt) > time.Minute {
		t.Errorf("created_at = %v", e.CreatedAt)
	}
}

func testIngestScopesIDBySource(t *testing.T, s hookbox.Store) {
	rs := ingest(t, s, Delivery("a", "1"), Delivery("b", "1"))
	if rs[0].Duplicate || rs[1].Duplicate {
		t.Fatalf("same id under two sources must be two events: %+v", rs)
	}
}

// testIngestConcurrentSameID is invariant 2: concurrent copies of one
// delivery produce exactly one row and exactly one "new" answer.
func testIngestConcurrentSameID(t *testing.T, s hookbox.Store) {
	const copies = 100
	var wg sync.WaitGroup
	var retried atomic.Int32
	rs := make([]hookbox.Receipt, copies)
	errs := make([]error, copies)
	start := make(chan struct{})
	for i := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var r []hookbox.Receipt
			// A copy the store cannot take now (ErrUnavailable: no
			// connection within the begin's limit on a loaded machine)
			// is sent again, as a sender answered 503 would.
			for try := 0; ; try++ {
				r, errs[i] = s.Ingest(context.Background(), []hookbox.Delivery{Delivery("race", "same")})
				if !errors.Is(errs[i], hookbox.ErrUnavailable) || try == 20 {
					break
				}
				retried.Add(1)
			}
			if errs[i] == nil {
				rs[i] = r[0]
			}
		}()
	}
	close(start)
	wg.Wait()
	news := 0
	for i := range copies {
		if errs[i] != nil {
			t.Fatalf("copy %d: %v", i, errs[i])
		}
		if !rs[i].Duplicate {
			news++
		}
		if rs[i].ID != rs[0].ID {
			t.Errorf("copy %d got id %d, copy 0 got %d", i, rs[i].ID, rs[0].ID)
		}
	}
	// A copy sent again after a failed commit may find its own row, if
	// that commit took effect: then no answer says new.
	if news != 1 && (retried.Load() == 0 || news > 1) {
		t.Errorf("%d copies reported new (%d sent again), want exactly 1", news, retried.Load())
	}
	if n := count(t, s, hookbox.Filter{Source: "race"}); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

// testIngestConcurrentBatches runs overlapping batches from many goroutines:
// every key ends as one row, and exactly one receipt per key says new.
func testIngestConcurrentBatches(t *testing.T, s hookbox.Store) {
	const workers, keys = 8, 50
	var mu sync.Mutex
	news := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ds []hookbox.Delivery
			for k := range keys {
				ds = append(ds, Delivery("batch", fmt.Sprint((k+w)%keys)))
			}
			rs, err := s.Ingest(context.Background(), ds)
			if err != nil {
				t.Errorf("worker %d: %v", w, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range rs {
				if !r.Duplicate {
					news[ds[i].DeliveryID]++
				}
			}
		}()
	}
	wg.Wait()
	if len(news) != keys {
		t.Errorf("%d keys reported new, want %d", len(news), keys)
	}
	for k, n := range news {
		if n != 1 {
			t.Errorf("key %s reported new %d times", k, n)
		}
	}
	if n := count(t, s, hookbox.Filter{Source: "batch"}); n != keys {
		t.Errorf("rows = %d, want %d", n, keys)
	}
}

func testEventNotFound(t *testing.T, s hookbox.Store) {
	_, err := s.Event(context.Background(), 987654321)
	if !errors.Is(err, hookbox.ErrNotFound) {
		t.Fatalf("Event(missing) error = %v, want ErrNotFound", err)
	}
}

func testEventsFilter(t *testing.T, s hookbox.Store) {
	a := Delivery("fa", "1")
	b := Delivery("fb", "2")
	b.EventType = "other"
	c := Delivery("fa", "3")
	rs := ingest(t, s, a, b, c)
	cases := []struct {
		f    hookbox.Filter
		want int
	}{
		{hookbox.Filter{Source: "fa"}, 2},
		{hookbox.Filter{EventType: "other"}, 1},
		{hookbox.Filter{Status: hookbox.StatusPending}, 3},
		{hookbox.Filter{Status: hookbox.StatusDone}, 0},
		{hookbox.Filter{Since: time.Now().Add(-time.Hour)}, 3},
		{hookbox.Filter{Until: time.Now().Add(-time.Hour)}, 0},
		{hookbox.Filter{BeforeID: rs[2].ID}, 2},
		{hookbox.Filter{DeliveryID: "3"}, 1},
		{hookbox.Filter{Source: "fb", DeliveryID: "2"}, 1},
		{hookbox.Filter{Source: "fa", DeliveryID: "2"}, 0},
	}
	for _, c := range cases {
		if n := count(t, s, c.f); n != c.want {
			t.Errorf("filter %+v: %d events, want %d", c.f, n, c.want)
		}
	}
	es, err := s.Events(context.Background(), hookbox.Filter{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].ID != rs[2].ID || es[1].ID != rs[1].ID {
		t.Errorf("limit 2 newest first = %v", es)
	}
	if es[0].Payload != nil {
		t.Errorf("listing carries payloads")
	}
}

// testClosedStoreRefusesIngest: a store that cannot commit must say so, so
// the receiver answers 503 instead of 202.
func testClosedStoreRefusesIngest(t *testing.T, s hookbox.Store) {
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rs, err := s.Ingest(context.Background(), []hookbox.Delivery{Delivery("closed", "1")})
	if err == nil {
		t.Fatalf("Ingest on a closed store returned %+v and no error", rs)
	}
	if !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("error %v does not match ErrUnavailable", err)
	}
	if s.Ping(context.Background()) == nil {
		t.Errorf("Ping on a closed store succeeded")
	}
}

// beginIngest opens an ingest transaction.
func beginIngest(t *testing.T, s hookbox.IngestBeginner) hookbox.IngestTx {
	t.Helper()
	tx, err := s.BeginIngest(context.Background())
	if err != nil {
		t.Fatalf("BeginIngest: %v", err)
	}
	t.Cleanup(func() { tx.Rollback() }) // after a failed check; a no-op after Commit
	return tx
}

// testIngestTxAcrossAdds: deliveries added in several batches of one
// transaction see each other (a repeat in a later Add is a duplicate of
// the row an earlier Add made) and are all stored by one Commit.
func testIngestTxAcrossAdds(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	old := ingest(t, s, Delivery("polar", "before"))[0]
	tx := beginIngest(t, s)
	first, err := tx.Add(ctx, []hookbox.Delivery{Delivery("polar", "a"), Delivery("polar", "before")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := tx.Add(ctx, []hookbox.Delivery{Delivery("polar", "b"), Delivery("polar", "a")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if first[0].Duplicate || second[0].Duplicate {
		t.Errorf("new deliveries reported duplicate: %+v %+v", first, second)
	}
	if !first[1].Duplicate || first[1].ID != old.ID {
		t.Errorf("repeat of a committed row = %+v, want duplicate of %d", first[1], old.ID)
	}
	if !second[1].Duplicate || second[1].ID != first[0].ID {
		t.Errorf("repeat of an earlier Add = %+v, want duplicate of %d", second[1], first[0].ID)
	}
	if n := count(t, s, hookbox.Filter{}); n != 3 {
		t.Errorf("rows = %d, want 3", n)
	}
}

// testIngestTxRollback: a rolled-back transaction stores nothing, and the
// store takes the same deliveries afterwards as new.
func testIngestTxRollback(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	tx := beginIngest(t, s)
	if _, err := tx.Add(ctx, []hookbox.Delivery{Delivery("polar", "x"), Delivery("polar", "y")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, hookbox.Filter{}); n != 0 {
		t.Fatalf("rows after rollback = %d, want 0", n)
	}
	if rs := ingest(t, s, Delivery("polar", "x")); rs[0].Duplicate {
		t.Errorf("after rollback x = %+v, want new", rs[0])
	}
}

// badBatch is 100 good deliveries with two bad ones among them: a 6 KB id
// and an event type that is not UTF-8. It returns the indexes of the bad.
func badBatch(source string) ([]hookbox.Delivery, []int) {
	var ds []hookbox.Delivery
	for i := range 100 {
		ds = append(ds, Delivery(source, fmt.Sprint("good-", i)))
	}
	long := Delivery(source, "long-"+strings.Repeat("x", 6000))
	notUTF8 := Delivery(source, "type")
	notUTF8.EventType = "bad\xff"
	ds = append(ds[:30], append([]hookbox.Delivery{long}, ds[30:]...)...)
	ds = append(ds, notUTF8)
	return ds, []int{30, len(ds) - 1}
}

// checkBad checks that err names exactly the bad deliveries and matches
// ErrBadDelivery, not ErrUnavailable, and that its text does not quote a
// long id in full.
func checkBad(t *testing.T, err error, bad []int, n int) {
	t.Helper()
	var bd *hookbox.BadDeliveries
	if !errors.As(err, &bd) {
		t.Fatalf("error = %v, want *hookbox.BadDeliveries", err)
	}
	if !errors.Is(err, hookbox.ErrBadDelivery) || errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("error %v: want ErrBadDelivery and not ErrUnavailable", err)
	}
	for i := range n {
		want := false
		for _, b := range bad {
			want = want || b == i
		}
		if got := bd.ItemError(i) != nil; got != want {
			t.Errorf("delivery %d: bad = %v, want %v (%v)", i, got, want, bd.ItemError(i))
		}
		if e := bd.ItemError(i); e != nil && (!errors.Is(e, hookbox.ErrBadDelivery) || len(e.Error()) > 300) {
			t.Errorf("delivery %d: error %.400q does not match ErrBadDelivery or is too long", i, e)
		}
	}
}

// testIngestBadDeliveryAlone: deliveries that cannot be stored are refused
// alone; the 100 sent with them are stored (issue 13).
func testIngestBadDeliveryAlone(t *testing.T, s hookbox.Store) {
	ds, bad := badBatch("bad")
	rs, err := s.Ingest(context.Background(), ds)
	checkBad(t, err, bad, len(ds))
	if len(rs) != len(ds) {
		t.Fatalf("%d receipts for %d deliveries", len(rs), len(ds))
	}
	for i, r := range rs {
		if i != bad[0] && i != bad[1] && (r.ID == 0 || r.Duplicate) {
			t.Errorf("good delivery %d: %+v, want stored as new", i, r)
		}
	}
	if n := count(t, s, hookbox.Filter{Source: "bad"}); n != 100 {
		t.Errorf("rows = %d, want the 100 good deliveries", n)
	}
}

// testIngestTxBadDelivery: a bad delivery in a later Add of an open
// transaction leaves the earlier Adds and its good neighbours in it.
func testIngestTxBadDelivery(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	tx := beginIngest(t, s)
	first, err := tx.Add(ctx, []hookbox.Delivery{Delivery("txbad", "a"), Delivery("txbad", "b")})
	if err != nil {
		t.Fatal(err)
	}
	ds, bad := badBatch("txbad")
	second, err := tx.Add(ctx, ds)
	checkBad(t, err, bad, len(ds))
	third, err := tx.Add(ctx, []hookbox.Delivery{Delivery("txbad", "c"), Delivery("txbad", "a")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if first[0].ID == 0 || first[1].ID == 0 || third[0].ID == 0 || second[0].ID == 0 {
		t.Errorf("receipts %+v %+v %+v", first, second[:1], third)
	}
	if !third[1].Duplicate || third[1].ID != first[0].ID {
		t.Errorf("repeat of a = %+v, want duplicate of %d", third[1], first[0].ID)
	}
	if n := count(t, s, hookbox.Filter{Source: "txbad"}); n != 103 {
		t.Errorf("rows = %d, want 103", n)
	}
}

// testIngestRefusesBadOrderKey: a delivery whose order key a store cannot
// keep as it is (longer than hookbox.MaxOrderKeyLength, not UTF-8, holding
// a NUL byte) is refused alone, by Ingest and by IngestTx.Add, on every
// store: nothing of it is stored, its neighbours are. A key of exactly the
// bound is stored as it is. Routing never gives such a key, but a library
// caller sets Route.OrderKey itself: SQLite stored every one of them (a
// megabyte, a NUL byte), and PostgreSQL any up to its index's limit.
func testIngestRefusesBadOrderKey(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	keyed := func(id, key string) hookbox.Delivery {
		d := Delivery("ok", id)
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}, {Target: "b", OrderKey: key}}
		return d
	}
	bound := strings.Repeat("k", hookbox.MaxOrderKeyLength)
	batch := func(prefix string) []hookbox.Delivery {
		return []hookbox.Delivery{
			keyed(prefix+"good", "cust-1"),
			keyed(prefix+"bound", bound),
			keyed(prefix+"long", bound+"k"),
			keyed(prefix+"megabyte", strings.Repeat("k", 1<<20)),
			keyed(prefix+"nul", "cust\x00-2"),
			keyed(prefix+"latin-1", "caf\xe9"),
		}
	}
	bad := []int{2, 3, 4, 5}
	_, err := s.Ingest(ctx, batch("one-"))
	checkBad(t, err, bad, 6)
	tx := beginIngest(t, s)
	_, err = tx.Add(ctx, batch("tx-"))
	checkBad(t, err, bad, 6)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ok", "ok/a", "ok/b"} {
		evs, err := s.Events(ctx, hookbox.Filter{Source: q, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range evs {
			got[e.DeliveryID] = e.OrderKey
		}
		want := map[string]string{"one-good": "", "one-bound": "", "tx-good": "", "tx-bound": ""}
		if q == "ok/b" {
			want = map[string]string{"one-good": "cust-1", "one-bound": bound, "tx-good": "cust-1", "tx-bound": bound}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: stored delivery ids and order keys %.300q, want %q", q, got, want)
		}
	}
}

// withBody returns d deduped by its body too.
func withBody(d hookbox.Delivery, body string) hookbox.Delivery {
	d.Payload = []byte(body)
	sum := sha256.Sum256(d.Payload)
	d.BodySHA256 = sum[:]
	return d
}

// testIngestSameBodyNewID: a body already stored for the source under
// another id is a duplicate of the first event when the delivery sets
// BodySHA256 (a replayed GitHub body under a fresh X-GitHub-Delivery); not
// for another source, nor without BodySHA256.
func testIngestSameBodyNewID(t *testing.T, s hookbox.Store) {
	first := ingest(t, s, withBody(Delivery("gh", "d-1"), `{"ref":"main"}`))[0]
	if first.Duplicate {
		t.Fatalf("first = %+v", first)
	}
	again := ingest(t, s,
		withBody(Delivery("gh", "d-2"), `{"ref":"main"}`),    // replay under a new id
		withBody(Delivery("gh", "d-1"), `{"ref":"other"}`),   // known id, new body
		withBody(Delivery("gh2", "d-9"), `{"ref":"main"}`),   // another source
		Delivery("gh", "d-3"),                                // no body key
		withBody(Delivery("gh", "d-4"), `{"ref":"feature"}`), // new
	)
	if !again[0].Duplicate || again[0].ID != first.ID {
		t.Errorf("same body, new id = %+v, want duplicate of %d", again[0], first.ID)
	}
	if !again[1].Duplicate || again[1].ID != first.ID {
		t.Errorf("same id, new body = %+v, want duplicate of %d", again[1], first.ID)
	}
	for _, i := range []int{2, 3, 4} {
		if again[i].Duplicate {
			t.Errorf("delivery %d = %+v, want new", i, again[i])
		}
	}
	if n := count(t, s, hookbox.Filter{}); n != 4 {
		t.Errorf("rows = %d, want 4", n)
	}
}

// testIngestSameBodyInOneBatch: two copies of one body under two ids in one
// batch, and in two Adds of one transaction, yield one row; the first is
// new.
func testIngestSameBodyInOneBatch(t *testing.T, s hookbox.Store) {
	rs := ingest(t, s,
		withBody(Delivery("gh", "z-9"), `{"n":1}`),
		withBody(Delivery("gh", "a-1"), `{"n":1}`),
		withBody(Delivery("gh", "m-5"), `{"n":2}`),
	)
	if rs[0].Duplicate || rs[2].Duplicate {
		t.Errorf("first copies = %+v, want new", rs)
	}
	if !rs[1].Duplicate || rs[1].ID != rs[0].ID {
		t.Errorf("second copy = %+v, want duplicate of %d", rs[1], rs[0].ID)
	}
	ctx := context.Background()
	tx := beginIngest(t, s)
	a, err := tx.Add(ctx, []hookbox.Delivery{withBody(Delivery("gh", "t-2"), `{"n":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tx.Add(ctx, []hookbox.Delivery{withBody(Delivery("gh", "t-1"), `{"n":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a[0].Duplicate || !b[0].Duplicate || b[0].ID != a[0].ID {
		t.Errorf("across Adds: %+v then %+v, want new then its duplicate", a[0], b[0])
	}
	if n := count(t, s, hookbox.Filter{}); n != 3 {
		t.Errorf("rows = %d, want 3", n)
	}
}

// testIngestBatchRepeatOfDuplicate: the first copy of a key in a batch can
// be a duplicate of a stored row by its other key, which it then leaves
// unstored; a later entry that shares only that key with it is not its
// repeat. Alone, (c, body y) is stored new when a stored row holds id a
// and body x; in one batch after (a, body y) it must be too, and so must
// (b, body z) after (b, body x).
func testIngestBatchRepeatOfDuplicate(t *testing.T, s hookbox.Store) {
	stored := ingest(t, s, withBody(Delivery("gh", "a"), `{"n":"x"}`))[0]
	rs := ingest(t, s,
		withBody(Delivery("gh", "a"), `{"n":"y"}`),
		withBody(Delivery("gh", "c"), `{"n":"y"}`),
	)
	if !rs[0].Duplicate || rs[0].ID != stored.ID {
		t.Errorf("known id = %+v, want duplicate of %d", rs[0], stored.ID)
	}
	ingest(t, s, withBody(Delivery("gh2", "a"), `{"n":"x"}`))
	ingest(t, s, withBody(Delivery("gh2", "a"), `{"n":"y"}`))
	alone := ingest(t, s, withBody(Delivery("gh2", "c"), `{"n":"y"}`))[0]
	if alone.Duplicate {
		t.Fatalf("alone: c = %+v, want new", alone)
	}
	if rs[1].Duplicate {
		t.Errorf("in one batch: c = %+v, a duplicate of %d (whose body differs); alone it is stored new: its body is lost", rs[1], rs[1].ID)
	}
	if n := count(t, s, hookbox.Filter{Source: "gh"}); n != 2 {
		t.Errorf("rows of gh = %d, want 2 (as for gh2)", n)
	}
	ingest(t, s, withBody(Delivery("gh3", "a"), `{"n":"x"}`))
	rs = ingest(t, s,
		withBody(Delivery("gh3", "b"), `{"n":"x"}`),
		withBody(Delivery("gh3", "b"), `{"n":"z"}`),
	)
	if rs[1].Duplicate {
		t.Errorf("in one batch: (b, z) = %+v, a duplicate of an event with another id and body: its body is lost", rs[1])
	}
}

// testIngestBatchesAsOneAtATime: batching never changes which deliveries
// are stored nor what their receipts say. Random batches over a few ids
// and bodies, after a few deliveries stored before, are ingested in one
// source, in one Ingest or in several Adds of one transaction, and one at
// a time in another; each receipt must name the same event (by delivery
// id and body) with the same duplicate flag, and the two sources must end
// with the same rows.
func testIngestBatchesAsOneAtATime(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	ids := []string{"a", "b", "c"}
	bodies := []string{`{"n":"x"}`, `{"n":"y"}`, `{"n":"z"}`, ""} // "": no body key
	pick := func(source string, n int) []hookbox.Delivery {
		ds := make([]hookbox.Delivery, n)
		for i := range ds {
			ds[i] = Delivery(source, ids[rng.IntN(len(ids))])
			if b := bodies[rng.IntN(len(bodies))]; b != "" {
				ds[i] = withBody(ds[i], b)
			}
		}
		return ds
	}
	// named gives the stored event a receipt names, as "delivery id body".
	named := func(r hookbox.Receipt) string {
		t.Helper()
		e, err := s.Event(ctx, r.ID)
		if err != nil {
			t.Fatalf("Event(%d): %v", r.ID, err)
		}
		return fmt.Sprintf("dup=%v %s %s", r.Duplicate, e.DeliveryID, e.Payload)
	}
	rows := func(source string) []string {
		t.Helper()
		es, err := s.Events(ctx, hookbox.Filter{Source: source, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, named(hookbox.Receipt{ID: e.ID}))
		}
		slices.Sort(out)
		return out
	}
	as := func(source string, ds []hookbox.Delivery) []hookbox.Delivery {
		out := slices.Clone(ds)
		for i := range out {
			out[i].Source = source
		}
		return out
	}
	for run := range 60 {
		before, batch := pick("", rng.IntN(3)), pick("", 2+rng.IntN(4))
		one, many := fmt.Sprint("one-", run), fmt.Sprint("many-", run)
		for _, d := range before {
			ingest(t, s, as(one, []hookbox.Delivery{d})...)
			ingest(t, s, as(many, []hookbox.Delivery{d})...)
		}
		var want []hookbox.Receipt
		for _, d := range as(one, batch) {
			want = append(want, ingest(t, s, d)...)
		}
		var got []hookbox.Receipt
		adds := "one Ingest"
		if rng.IntN(2) == 0 {
			got = ingest(t, s, as(many, batch)...)
		} else {
			tx := beginIngest(t, s)
			rest := as(many, batch)
			var sizes []int
			for len(rest) > 0 {
				n := 1 + rng.IntN(len(rest))
				rs, err := tx.Add(ctx, rest[:n])
				if err != nil {
					t.Fatalf("Add: %v", err)
				}
				got, rest, sizes = append(got, rs...), rest[n:], append(sizes, n)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			adds = fmt.Sprint("Adds of ", sizes)
		}
		var trace strings.Builder
		for _, d := range before {
			fmt.Fprintf(&trace, "\n  before: %s %s", d.DeliveryID, d.Payload)
		}
		for _, d := range batch {
			fmt.Fprintf(&trace, "\n  batch:  %s %s (body key %v)", d.DeliveryID, d.Payload, d.BodySHA256 != nil)
		}
		for i := range batch {
			if g, w := named(got[i]), named(want[i]); g != w {
				t.Errorf("seed %d run %d, %s: delivery %d = %s, one at a time %s%s", seed, run, adds, i, g, w, trace.String())
			}
		}
		if g, w := rows(many), rows(one); !slices.Equal(g, w) {
			t.Errorf("seed %d run %d, %s: rows %q, one at a time %q%s", seed, run, adds, g, w, trace.String())
		}
	}
}
