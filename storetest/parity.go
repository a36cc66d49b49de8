package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// parityTests pin outcomes that a store could give differently from the
// other for the same calls, where nothing else in the suite looks: what a
// finished event shows, the order of listed names, the zero counts, the
// precision of times, exact matching of text, and what calls about ids
// and names that do not exist return. RunOps runs them, and RunParity
// alone.
var parityTests = map[string]func(*testing.T, FullStore){
	"DoneClearsLastError":     testDoneClearsLastError,
	"NamesInByteOrder":        testNamesInByteOrder,
	"StatsCountEveryStatus":   testStatsCountEveryStatus,
	"PauseRefusesBadText":     testPauseRefusesBadText,
	"TimesAtStorePrecision":   testTimesAtStorePrecision,
	"FiltersMatchTextExactly": testFiltersMatchTextExactly,
	"MissingIDsAndNames":      testMissingIDsAndNames,
}

// RunParity runs the cases of the suite that pin what could differ
// between stores for the same calls (RunOps runs them too), for a store
// opened in a way the rest of the suite does not depend on, such as a
// database with another collation.
func RunParity(t *testing.T, open func(t *testing.T) FullStore) {
	for name, fn := range parityTests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

// testDoneClearsLastError: an event that ends done shows no last error,
// whatever error text the outcome carried (a library's WorkFunc may set
// one beside StatusDone): the last error says why the last attempt
// failed, and a done one did not. The attempt's row keeps the text. It
// holds for the three ways an outcome is applied: Queue.Finish, a Work
// transaction's Finish of held events, and the finish of events a
// ClaimWork transaction picked. PostgreSQL kept the text as the done
// event's last error, where SQLite dropped it.
func testDoneClearsLastError(t *testing.T, s FullStore) {
	ctx := context.Background()
	failOnce := func(source string) {
		t.Helper()
		ingest(t, s, Delivery(source, "1"))
		ev := claim(t, s, time.Now(), 1, source)[0]
		o := outcome(ev, hookbox.StatusPending, time.Now())
		o.Error = "target said 500"
		finish(t, s, o)
	}
	done := func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
		o := outcome(*ev, hookbox.StatusDone, time.Now())
		o.Error = "done, with a note"
		return o
	}
	check := func(how, source string) {
		t.Helper()
		es, err := s.Events(ctx, hookbox.Filter{Source: source})
		if err != nil || len(es) != 1 {
			t.Fatalf("%s: events %+v, %v", how, es, err)
		}
		e := status(t, s, es[0].ID)
		if e.Status != hookbox.StatusDone || e.LastError != "" || es[0].LastError != "" {
			t.Errorf("%s: event is %s with last error %q (listed: %q), want done with none",
				how, e.Status, e.LastError, es[0].LastError)
		}
		as, err := s.Attempts(ctx, e.ID)
		if err != nil || len(as) != 2 || as[1].Outcome != hookbox.AttemptDone || as[1].Error != "done, with a note" {
			t.Errorf("%s: attempts %+v, %v; want the done attempt with its text", how, as, err)
		}
	}

	failOnce("dle-finish")
	ev := claim(t, s, time.Now(), 1, "dle-finish")[0]
	o := outcome(ev, hookbox.StatusDone, time.Now())
	o.Error = "done, with a note"
	if errs := finish(t, s, o); errs[0] != nil {
		t.Fatalf("finish: %v", errs[0])
	}
	check("Queue.Finish", "dle-finish")

	failOnce("dle-work")
	evs := claim(t, s, time.Now(), 1, "dle-work")
	if _, errs, err := Work(s, evs, done); err != nil || errs[0] != nil {
		t.Fatalf("Work: %v %v", errs, err)
	}
	check("Work", "dle-work")

	failOnce("dle-pick")
	p := hookbox.ClaimParams{Owner: "dle", Limit: 1, Lease: time.Minute, Sources: []string{"dle-pick"}}
	if _, _, errs, err := ClaimWork(s, p, done); err != nil || len(errs) != 1 || errs[0] != nil {
		t.Fatalf("ClaimWork: %v %v", errs, err)
	}
	check("ClaimWork", "dle-pick")
}

// testNamesInByteOrder: the lists of queue names come in byte order (Go's
// string order, SQLite's BINARY), whatever the database's collation: in
// a PostgreSQL database created with a language's locale (en-US, as most
// servers default to) UnfinishedTargets, DueQueues and Paused came in
// that language's order, which ignores punctuation and case at first.
func testNamesInByteOrder(t *testing.T, s FullStore) {
	ctx := context.Background()
	names := []string{"a_b", "A-c", "a-b", "aXb", "a.b", "b", "a0", "B"}
	for _, n := range names {
		ingest(t, s, Delivery(n, "1"))
		if err := s.PauseTarget(ctx, n+"/t", "why"); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Sorted(slices.Values(names))
	unfinished, err := s.UnfinishedTargets(ctx)
	if err != nil || !slices.Equal(unfinished, want) {
		t.Errorf("UnfinishedTargets = %q, %v; want %q", unfinished, err, want)
	}
	due, err := s.DueQueues(ctx)
	if err != nil || !slices.Equal(due, want) {
		t.Errorf("DueQueues = %q, %v; want %q", due, err, want)
	}
	ps, err := s.Paused(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paused []string
	for _, p := range ps {
		paused = append(paused, p.Name)
	}
	var wantPaused []string
	for _, n := range want {
		wantPaused = append(wantPaused, n+"/t")
	}
	if !slices.Equal(paused, wantPaused) {
		t.Errorf("Paused = %q; want %q", paused, wantPaused)
	}
}

// testStatsCountEveryStatus: Stats.ByStatus holds each state a queue row
// has (pending, processing, done, dead), 0 for one no event is in, and no
// other: SQLite held done and dead always and pending or processing only
// when some event was, PostgreSQL only the states some event was in.
func testStatsCountEveryStatus(t *testing.T, s FullStore) {
	ctx := context.Background()
	want := map[hookbox.Status]int{
		hookbox.StatusPending: 0, hookbox.StatusProcessing: 0, hookbox.StatusDone: 0, hookbox.StatusDead: 0,
	}
	check := func(when string) {
		t.Helper()
		st, err := s.Stats(ctx, time.Now())
		if err != nil || !maps.Equal(st.ByStatus, want) {
			t.Errorf("%s: ByStatus = %v, %v; want %v", when, st.ByStatus, err, want)
		}
	}
	check("empty")
	ingest(t, s, Delivery("sc", "1"))
	want[hookbox.StatusPending] = 1
	check("one pending")
	finishAs(t, s, "sc-dead", hookbox.StatusDead, time.Now(), "1", "2")
	want[hookbox.StatusDead] = 2
	check("with two dead")
}

// testTimesAtStorePrecision: times come back in UTC, at the store's
// precision (the millisecond on SQLite, the microsecond on PostgreSQL; a
// documented difference), never later than what was given; and a time
// read back bounds the listings as it reads: Since a created_at lists
// the event, Until it does not, nor Since a millisecond after it, and
// Until a millisecond after it does. The same for a rejection's
// received_at.
func testTimesAtStorePrecision(t *testing.T, s FullStore) {
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("IST", 5*3600+1800))
	d := Delivery("tp", "1")
	d.ReceivedAt = at
	e := status(t, s, ingest(t, s, d)[0].ID)
	inPrecision := func(what string, got time.Time) {
		t.Helper()
		if got.Location() != time.UTC || got.After(at) || at.Sub(got) >= time.Millisecond {
			t.Errorf("%s %v (%v), stored from %v: want it in UTC, within the millisecond up to it", what, got, got.Location(), at)
		}
	}
	inPrecision("created_at", e.CreatedAt)
	for _, c := range []struct {
		since, until time.Time
		want         int
	}{
		{since: e.CreatedAt, want: 1},
		{until: e.CreatedAt, want: 0},
		{since: e.CreatedAt.Add(time.Millisecond), want: 0},
		{until: e.CreatedAt.Add(time.Millisecond), want: 1},
	} {
		if n := count(t, s, hookbox.Filter{Source: "tp", Since: c.since, Until: c.until}); n != c.want {
			t.Errorf("since %v until %v: %d events, want %d", c.since, c.until, n, c.want)
		}
	}

	if _, err := s.AddRejections(ctx, []hookbox.Rejection{Rejection("tp", 401, at)}, hookbox.RejectionBounds{}); err != nil {
		t.Fatal(err)
	}
	rs := listRejections(t, s, hookbox.RejectionFilter{})
	if len(rs) != 1 {
		t.Fatalf("%d rejections", len(rs))
	}
	inPrecision("received_at", rs[0].ReceivedAt)
	if n := len(listRejections(t, s, hookbox.RejectionFilter{Since: rs[0].ReceivedAt})); n != 1 {
		t.Errorf("rejections since their received_at: %d, want 1", n)
	}
	if n := len(listRejections(t, s, hookbox.RejectionFilter{Since: rs[0].ReceivedAt.Add(time.Millisecond)})); n != 0 {
		t.Errorf("rejections since a millisecond after their received_at: %d, want 0", n)
	}
}

// testFiltersMatchTextExactly: the filters on text match it byte for
// byte: '%' and '_' in a filter are themselves, not wildcards, case is
// kept (ORDER.CREATED is not order.created), and neither a language's
// rules (ß is not ss) nor Unicode normalisation (é precomposed is not e
// and a combining accent) join two values. A source filter takes the
// source and its targets' deliveries, never another source that starts
// with its name.
func testFiltersMatchTextExactly(t *testing.T, s FullStore) {
	kinds := []struct{ id, typ string }{
		{"a%b", "Order.Created"}, {"a_b", "order.created"}, {"axb", "order_created"},
		{"Straße", "straße"}, {"STRASSE", "STRASSE"}, {"\u00e9", "\u00e9"}, {"e\u0301", "e\u0301"},
	}
	for _, k := range kinds {
		d := Delivery("ft", k.id)
		d.EventType = k.typ
		ingest(t, s, d)
	}
	for _, c := range []struct {
		f    hookbox.Filter
		want int
	}{
		{hookbox.Filter{EventType: "order.created"}, 1},
		{hookbox.Filter{EventType: "order_created"}, 1},
		{hookbox.Filter{EventType: "order%"}, 0},
		{hookbox.Filter{EventType: "ORDER.CREATED"}, 0},
		{hookbox.Filter{EventType: "strasse"}, 0},
		{hookbox.Filter{EventType: "\u00e9"}, 1},
		{hookbox.Filter{DeliveryID: "a%b"}, 1},
		{hookbox.Filter{DeliveryID: "a%"}, 0},
		{hookbox.Filter{DeliveryID: "a_b"}, 1},
		{hookbox.Filter{DeliveryID: "A_B"}, 0},
		{hookbox.Filter{DeliveryID: "Straße"}, 1},
		{hookbox.Filter{DeliveryID: "e\u0301"}, 1},
	} {
		c.f.Source = "ft"
		if n := count(t, s, c.f); n != c.want {
			t.Errorf("type %q id %q: %d events, want %d", c.f.EventType, c.f.DeliveryID, n, c.want)
		}
	}
	for _, src := range []string{"s_1", "s%1", "sX1", "s-1", "s"} {
		ingest(t, s, Delivery(src, "1"))
	}
	for src, want := range map[string]int{"s_1": 1, "s%1": 1, "s": 1, "S": 0, "s_": 0, "FT": 0} {
		if n := count(t, s, hookbox.Filter{Source: src}); n != want {
			t.Errorf("source %q: %d events, want %d", src, n, want)
		}
	}
}

// testMissingIDsAndNames: calls naming ids or queue names that do not
// exist answer alike on every store: a replay lists a missing id as
// skipped; Attempts of one is empty; Skip, KeyHead, Rejection and
// SetRejectionAdmitted say ErrNotFound; resuming, retiring, counting a
// name that has nothing changes nothing and counts 0; HeldKeys answers
// every name asked, none for none; a purge or a clearing of an empty
// store counts 0; a page past the last event is empty.
func testMissingIDsAndNames(t *testing.T, s FullStore) {
	ctx := context.Background()
	const missing = 987654
	ids := []int64{ingest(t, s, Delivery("mi", "1"))[0].ID, ingest(t, s, Delivery("mi", "2"))[0].ID}
	for _, dry := range []bool{false, true} {
		r, err := s.Replay(ctx, hookbox.ReplayParams{IDs: []int64{missing}, DryRun: dry})
		if err != nil || len(r.Replayed) != 0 || !slices.Equal(r.Skipped, []int64{missing}) {
			t.Errorf("replay of a missing id (dry %v): %+v, %v; want it skipped", dry, r, err)
		}
	}
	if as, err := s.Attempts(ctx, missing); err != nil || len(as) != 0 {
		t.Errorf("Attempts of a missing id: %+v, %v; want none", as, err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, hookbox.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", what, err)
		}
	}
	_, err := s.Skip(ctx, hookbox.SkipParams{ID: missing, Reason: "r", Via: "test"})
	notFound("Skip", err)
	_, _, err = s.KeyHead(ctx, "nothing", "k")
	notFound("KeyHead", err)
	_, err = s.Rejection(ctx, missing)
	notFound("Rejection", err)
	notFound("SetRejectionAdmitted", s.SetRejectionAdmitted(ctx, missing, ids[0]))

	if ok, err := s.ResumeTarget(ctx, "nothing/t"); ok || err != nil {
		t.Errorf("resume of a name never paused: %v, %v", ok, err)
	}
	if r, err := s.RetireTarget(ctx, hookbox.RetireParams{Name: "nothing", Reason: "r"}); r != (hookbox.RetireResult{}) || err != nil {
		t.Errorf("retire of a name with nothing: %+v, %v", r, err)
	}
	if b, err := s.TargetBacklog(ctx, "nothing", time.Now()); b != (hookbox.Backlog{Name: "nothing"}) || err != nil {
		t.Errorf("backlog of a name with nothing: %+v, %v", b, err)
	}
	if n, err := s.KeyedUnfinished(ctx, "nothing"); n != 0 || err != nil {
		t.Errorf("KeyedUnfinished of a name with nothing: %d, %v", n, err)
	}
	if hk, err := s.HeldKeys(ctx, nil); len(hk) != 0 || err != nil {
		t.Errorf("HeldKeys of no names: %v, %v", hk, err)
	}
	if hk, err := s.HeldKeys(ctx, []string{"nothing", "nothing"}); !maps.Equal(hk, map[string]int{"nothing": 0}) || err != nil {
		t.Errorf("HeldKeys of a name with nothing: %v, %v", hk, err)
	}
	if r, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now(), IncludeDead: true}); r.Total() != 0 || err != nil {
		t.Errorf("purge with nothing finished: %+v, %v", r, err)
	}
	if n, err := s.ClearPayloads(ctx, time.Now()); n != 0 || err != nil {
		t.Errorf("clearing with nothing finished: %d, %v", n, err)
	}
	if es, err := s.Events(ctx, hookbox.Filter{Source: "mi", BeforeID: min(ids[0], ids[1])}); len(es) != 0 || err != nil {
		t.Errorf("a page past the last event: %d events, %v", len(es), err)
	}
	if es, err := s.Events(ctx, hookbox.Filter{Source: "mi", Limit: 1}); len(es) != 1 || es[0].ID != max(ids[0], ids[1]) || err != nil {
		t.Errorf("a page of one: %v, %v", es, err)
	}
}

// testPauseRefusesBadText: a pause whose reason holds a NUL byte or text
// that is not UTF-8, or whose name is no queue name, is refused on every
// store and leaves nothing paused: SQLite kept such a reason, PostgreSQL
// failed with a data error (the admin API answered 500 there, 200 on
// SQLite). A reason of any length and script is kept as given.
func testPauseRefusesBadText(t *testing.T, s FullStore) {
	ctx := context.Background()
	for _, c := range []struct{ name, reason string }{
		{"shop/app", "a\x00b"}, {"shop/app", "caf\xe9"}, {"shop\x00/app", "r"}, {"shop/app/x", "r"}, {"", "r"},
		{"shop/app", strings.Repeat("x", hookbox.MaxPauseReason+1)},
	} {
		if err := s.PauseTarget(ctx, c.name, c.reason); err == nil || errors.Is(err, hookbox.ErrUnavailable) {
			t.Errorf("pause %q with reason %q: %v, want it refused as bad input", c.name, c.reason, err)
		}
	}
	if ps, err := s.Paused(ctx); len(ps) != 0 || err != nil {
		t.Errorf("after refused pauses: %+v, %v; want nothing paused", ps, err)
	}
	long := strings.Repeat("\u00e9\u4e2d", hookbox.MaxPauseReason/2) // the longest, in characters
	if err := s.PauseTarget(ctx, "shop/app", long); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.Paused(ctx); err != nil || len(ps) != 1 || ps[0].Reason != long {
		t.Errorf("a long reason came back as %d paused, %v", len(ps), err)
	}
}
