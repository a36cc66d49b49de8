package rejected_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
)

// drops counts what a Recorder did not store, by why.
type drops struct {
	mu  sync.Mutex
	why map[string]int
}

func (d *drops) add(source, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why == nil {
		d.why = map[string]int{}
	}
	d.why[why]++
}

func (d *drops) get(why string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.why[why]
}

func rejection(source string, body string) hookbox.Rejection {
	return hookbox.Rejection{Source: source, Status: 401, Reason: "no signature matches",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body), BodyComplete: true, BodySize: int64(len(body))}
}

// TestFloodStaysWithinBounds: a flood far larger than the bound, from one
// source and from many unknown names, leaves at most MaxCount rows; the
// rate limit refuses most of it up front and a full queue drops rather
// than waits. Record never blocks, whatever the writer is doing.
func TestFloodStaysWithinBounds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		var d drops
		rec := rejected.NewRecorder(st, rejected.Options{MaxCount: 50, Rate: 1, Burst: 200, QueueSize: 16, Dropped: d.add})
		const flood = 5000
		for i := range flood {
			known := i%2 == 0
			name := "polar"
			if !known {
				name = "guess-" + string(rune('a'+i%26))
			}
			if rec.Allow(name, known) {
				rec.Record(rejection(name, `{"n":1}`))
			}
		}
		rec.Close()
		rs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) > 50 || len(rs) == 0 {
			t.Errorf("log holds %d rows after a flood of %d, bound 50", len(rs), flood)
		}
		limited, full := d.get("rate_limited"), d.get("queue_full")
		if limited < flood-2*200-10 {
			t.Errorf("rate limit refused %d of %d (two buckets of 200)", limited, flood)
		}
		if int64(limited+full)+rec.Written() != flood {
			t.Errorf("limited %d + queue full %d + written %d != %d", limited, full, rec.Written(), flood)
		}
	})
}

// TestRecordKeepsABoundedCopy: the body is copied (the caller may reuse
// its buffer) and cut to MaxBodyBytes, which makes it incomplete; text
// that is not valid UTF-8 or holds NUL is made storable, and a header value
// cut ends with a mark of its length (HeaderAltered).
func TestRecordKeepsABoundedCopy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		rec := rejected.NewRecorder(st, rejected.Options{MaxBodyBytes: 4})
		buf := []byte("abcdefgh")
		rj := rejection("bad\x00name\xff", "")
		rj.Body, rj.BodySize, rj.UnknownSource = buf, 8, true
		rj.Header = http.Header{"X-Bad\x00": {"v\xff\x00"}, "X-Long": {strings.Repeat("x", hookbox.MaxIDLength+100)}}
		rec.Record(rj)
		copy(buf, "XXXXXXXX")
		short := rejection("polar", "abc")
		rec.Record(short)
		rec.Close()
		rs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rs) != 2 {
			t.Fatalf("%d rows, %v", len(rs), err)
		}
		cut, whole := rs[1], rs[0]
		if string(cut.Body) != "abcd" || cut.BodyComplete || cut.BodySize != 8 || cut.Source != "bad\uFFFDname\uFFFD" {
			t.Errorf("cut rejection: %+v body %q", cut, cut.Body)
		}
		if cut.Header.Get("X-Bad\uFFFD") != "v\uFFFD\uFFFD" ||
			cut.Header.Get("X-Long") != strings.Repeat("x", hookbox.MaxIDLength)+"…(500 bytes)" {
			t.Errorf("headers: %q", cut.Header)
		}
		if !rejected.HeaderAltered(cut.Header) || rejected.HeaderAltered(whole.Header) {
			t.Errorf("HeaderAltered: %v for the cut headers, %v for the whole ones", rejected.HeaderAltered(cut.Header), rejected.HeaderAltered(whole.Header))
		}
		if string(whole.Body) != "abc" || !whole.BodyComplete {
			t.Errorf("whole rejection: %+v", whole)
		}
	})
}

// TestRecheckJudgesTimeAtReceipt: a delivery received an hour ago, signed
// then with the right secret, passes a re-check today (its timestamp is
// judged against when it was received), although the same headers sent
// now would be too old. One received long after its signed time does not.
func TestRecheckJudgesTimeAtReceipt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		cfg := verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"whsec_cmlnaHQtc2VjcmV0LWZvci1yZWNoZWNr"}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hourAgo := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		body := []byte(`{"type":"a.b"}`)
		var rs []hookbox.Rejection
		for _, c := range []struct {
			id             string
			signed, recvAt time.Time
		}{{"in-time", hourAgo, hourAgo}, {"late", hourAgo.Add(-time.Hour), hourAgo}} {
			hdr, err := verify.Sign(cfg, body, c.id, c.signed)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, hookbox.Rejection{Source: "polar", ReceivedAt: c.recvAt, Status: 401, Header: hdr,
				Body: body, BodyComplete: true, BodySize: int64(len(body))})
		}
		partial := rs[0]
		partial.BodyComplete = false
		rs = append(rs, partial)
		if _, err := st.AddRejections(ctx, rs, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"polar": {Verifier: v}}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 1 || len(res.Refused) != 2 {
			t.Fatalf("re-check: %+v", res)
		}
		ev, err := st.Event(ctx, res.Admitted[0].EventID)
		if err != nil || ev.DeliveryID != "in-time" || !ev.CreatedAt.Equal(hourAgo) {
			t.Errorf("admitted %+v, %v; want in-time, created when received", ev, err)
		}
		if res.Refused[0].Reason != rejected.ReasonNotWhole {
			t.Errorf("refusals: %+v", res.Refused)
		}
	})
}

// TestRecheckSameDeliveryTwice: a sender that retried a refused delivery
// left two rejections of it; a re-check stores one event, the second is
// its duplicate; re-checking by id names what is already admitted.
func TestRecheckSameDeliveryTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-recheck-secret-0123"}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"zen":"retried"}`)
		hdr, err := verify.Sign(cfg, body, "delivery-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rj := hookbox.Rejection{Source: "gh", ReceivedAt: time.Now(), Status: 401, Header: hdr, Body: body, BodyComplete: true, BodySize: int64(len(body))}
		if _, err := st.AddRejections(ctx, []hookbox.Rejection{rj, rj}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		sources := map[string]rejected.Source{"gh": {Verifier: v}}
		res, err := rejected.Recheck(ctx, st, sources, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 2 || res.Admitted[0].EventID != res.Admitted[1].EventID ||
			res.Admitted[0].Duplicate == res.Admitted[1].Duplicate {
			t.Fatalf("re-check of one delivery sent twice: %+v", res)
		}
		if evs, _ := st.Events(ctx, hookbox.Filter{}); len(evs) != 1 {
			t.Errorf("%d events stored, want 1", len(evs))
		}
		again, err := rejected.Recheck(ctx, st, sources, rejected.RecheckParams{IDs: []int64{res.Admitted[0].RejectionID, 999}})
		if err != nil || len(again.Admitted) != 0 || len(again.Refused) != 2 || again.Refused[0].Reason != rejected.ReasonAlreadyStored {
			t.Errorf("re-check by id: %+v %v", again, err)
		}
	})
}

// TestRecordAfterClose: a rejection recorded after Close (a request the
// server was still answering while hookbox stopped) is dropped and counted
// as "stopped", never a send on the closed queue (a panic, and a data race
// the race detector saw in service TestStopWithASenderStillSending), even
// while Close runs.
func TestRecordAfterClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		d := &drops{}
		rec := rejected.NewRecorder(st, rejected.Options{Dropped: d.add})
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 200 {
					rec.Record(rejection("polar", fmt.Sprint(i, "-", j)))
				}
			}()
		}
		rec.Close()
		rec.Record(rejection("polar", "late"))
		wg.Wait()
		if d.get("stopped") == 0 {
			t.Errorf("a rejection recorded after Close was not counted as stopped")
		}
	})
}

// TestHeaderValuesLeftOutAreMarked: a request of exactly as many header
// values as the log keeps is kept whole, and can be re-checked; one of
// more has the rest left out, and a header saying how many, so
// HeaderAltered knows. (It used to take a request of exactly 64 values for
// one cut.)
func TestHeaderValuesLeftOutAreMarked(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		rec := rejected.NewRecorder(st, rejected.Options{})
		for _, n := range []int{64, 66} {
			rj := rejection("polar", "{}")
			rj.Header = http.Header{}
			for i := range n {
				rj.Header.Set(fmt.Sprintf("X-H%02d", i), "v")
			}
			rec.Record(rj)
		}
		rec.Close()
		rs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rs) != 2 {
			t.Fatalf("%d rows, %v", len(rs), err)
		}
		all, some := rs[1], rs[0]
		if len(all.Header) != 64 || rejected.HeaderAltered(all.Header) {
			t.Errorf("64 values sent: %d kept, altered %v; want all, not altered", len(all.Header), rejected.HeaderAltered(all.Header))
		}
		if len(some.Header) != 65 || some.Header.Get("\uFFFD-Values-Left-Out") != "2" || !rejected.HeaderAltered(some.Header) {
			t.Errorf("66 values sent: %d kept (%q left out), altered %v; want 64 and the count of 2, altered",
				len(some.Header), some.Header.Get("\uFFFD-Values-Left-Out"), rejected.HeaderAltered(some.Header))
		}
	})
}

// ingestInto is a server.Config Ingest that stores each delivery in st.
func ingestInto(st hookbox.Store) func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) {
	return func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
		rcs, err := st.Ingest(ctx, []hookbox.Delivery{d})
		if err != nil {
			return hookbox.Receipt{}, err
		}
		return rcs[0], nil
	}
}

// TestCredentialListOutsideTheValueBound: the log's list of the headers
// that carry a token (MarkCredentials) is kept whatever the bound on
// header values, and is no alteration: a delivery of exactly 64 values,
// its token among them, keeps them all and the list, and a re-check
// could still take it as sent. Counted as a 65th value, the list, or the
// token, would have been left out, and the token then shown unmasked or
// the delivery taken for altered.
func TestCredentialListOutsideTheValueBound(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		rec := rejected.NewRecorder(st, rejected.Options{})
		rj := rejection("tok", "{}")
		rj.Header = http.Header{"X-Shared": {"TokenSecretValue999"}}
		for i := range 63 {
			rj.Header.Set(fmt.Sprintf("X-H%02d", i), "v")
		}
		rj.Header = rejected.MarkCredentials(rj.Header, []string{"X-Shared"})
		rec.Record(rj)
		rec.Close()
		rs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{})
		if err != nil || len(rs) != 1 {
			t.Fatalf("%d rows, %v", len(rs), err)
		}
		shown := rejected.DisplayHeader(rs[0].Header)
		if len(shown) != 64 || shown.Get("X-Shared") != redact.Mask || rejected.HeaderAltered(rs[0].Header) {
			t.Errorf("%d values shown, X-Shared %q, altered %v; want 64, masked, not altered",
				len(shown), shown.Get("X-Shared"), rejected.HeaderAltered(rs[0].Header))
		}
	})
}

// TestStoreFailureLoggedSpacedOut: while the store fails, the writer
// fails a batch each quarter of a second that bad deliveries keep
// coming, at a rate their senders set; it wrote a warning for each (16
// lines in 5 s from one sender). It now writes one per ten seconds, as the
// receiving path does for deliveries it cannot store, and counts every
// rejection it drops.
func TestStoreFailureLoggedSpacedOut(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		logs := &syncbuf.Buffer{}
		d := &drops{}
		rec := rejected.NewRecorder(st, rejected.Options{Dropped: d.add,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		defer rec.Close()
		st.Close() // every write fails from now on
		const batches = 5
		for i := range batches {
			rec.Record(rejection("polar", fmt.Sprint(i)))
			awaitCond(t, fmt.Sprint("rejection ", i, " dropped"), func() bool { return d.get("store_failed") == i+1 })
		}
		if n := strings.Count(logs.String(), `msg="rejected deliveries not logged"`); n != 1 {
			t.Errorf("%d failed batches wrote %d warnings, want 1:\n%s", batches, n, logs)
		}
	})
}

// awaitCond waits for cond, failing the test after 15 s.
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
