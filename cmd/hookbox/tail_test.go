package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/storetest"
)

const tailConfig = `
sources:
  - name: orders
    scheme: none
    id_header: X-Id
    type_header: X-Type
    allow_ips: ["127.0.0.1"]
    store_only: true
  - name: other
    scheme: none
    id_header: X-Id
    allow_ips: ["127.0.0.1"]
    store_only: true
`

// TestTail: against a running hookbox, tail prints the newest event, then
// each new event of its filter once, in order, as it is stored; a
// duplicate delivery adds nothing, another source's events are left out;
// it stops cleanly when interrupted. On SQLite and PostgreSQL.
func TestTail(t *testing.T) {
	dbtest.Each(t, testTail)
}

// startTail runs `hookbox tail args…` until the function it returns
// interrupts it and returns its error; out is what it printed.
func startTail(t *testing.T, args ...string) (out *syncbuf.Buffer, interrupt func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out = &syncbuf.Buffer{}
	root := newRootCmd()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append([]string{"tail", "--interval", "20ms"}, args...))
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		if ctx.Err() == nil {
			// Ended before it was interrupted: say why in its output,
			// where the waiting test will show it.
			fmt.Fprintf(out, "tail ended early: %v\n", err)
		}
		done <- err
	}()
	return out, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("tail did not stop when interrupted")
			return nil
		}
	}
}

func testTail(t *testing.T, dbURL string) {
	srv := e2e.Start(t, tailConfig, dbURL, nil)
	send := func(source, id, typ string) {
		t.Helper()
		rep := srv.Post(source, http.Header{"X-Id": {id}, "X-Type": {typ}}, []byte(`{"id":"`+id+`"}`))
		if rep.Status != http.StatusAccepted {
			t.Fatalf("%s %s: %+v", source, id, rep)
		}
	}
	send("orders", "before-1", "order.created")
	send("orders", "before-2", "order.created")

	out, interrupt := startTail(t, "--db", dbURL, "--source", "orders", "-n", "1", "--json")
	await(t, "the newest event printed", func() bool { return strings.Contains(out.String(), "before-2") })
	send("orders", "live-1", "order.paid")
	send("other", "elsewhere-1", "x")
	send("orders", "live-2", "order.paid")
	send("orders", "live-1", "order.paid") // a duplicate: no new event
	await(t, "live events printed", func() bool { return strings.Contains(out.String(), "live-2") })
	send("orders", "live-3", "order.shipped")
	await(t, "a later event printed", func() bool { return strings.Contains(out.String(), "live-3") })

	if err := interrupt(); err != nil {
		t.Fatalf("tail: %v", err)
	}

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e struct {
			ID         int64  `json:"id"`
			Source     string `json:"source"`
			DeliveryID string `json:"delivery_id"`
			EventType  string `json:"event_type"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON event: %q (%v)\n%s", line, err, out)
		}
		if e.Source != "orders" || e.ID == 0 {
			t.Errorf("printed %+v", e)
		}
		got = append(got, e.DeliveryID)
	}
	want := []string{"before-2", "live-1", "live-2", "live-3"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tail printed %v, want %v", got, want)
	}
}

// TestTailText: the text form shows the time, id, source, type, status
// and delivery id of each event.
func TestTailText(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	srv := e2e.Start(t, tailConfig, dbURL, nil)
	if rep := srv.Post("orders", http.Header{"X-Id": {"text-1"}, "X-Type": {"order.paid"}}, []byte(`{}`)); rep.Status != http.StatusAccepted {
		t.Fatalf("%+v", rep)
	}
	out, interrupt := startTail(t, "--db", dbURL)
	await(t, "the event printed", func() bool { return strings.Contains(out.String(), "text-1") })
	if err := interrupt(); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(out.String())
	for _, want := range []string{"  1  orders  order.paid  stored  attempts=0  text-1"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, strings.Fields(line)[0]); err != nil {
		t.Errorf("line %q does not start with a time: %v", line, err)
	}
}

// TestTailRejected: a delivery hookbox refuses appears in tail as it is
// logged, as a REJECTED line, or in JSON as {"rejected": …} with its
// signature masked; --events-only leaves it out. On SQLite and PostgreSQL.
func TestTailRejected(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		srv := e2e.Start(t, `
sources:
  - name: signed
    scheme: standard-webhooks
    secrets: ["whsec_dGFpbC1yZWplY3RlZC10ZXN0LXNlY3JldA=="]
    store_only: true
`, dbURL, nil)
		jsonOut, stopJSON := startTail(t, "--db", dbURL, "--json")
		textOut, stopText := startTail(t, "--db", dbURL)
		only, stopOnly := startTail(t, "--db", dbURL, "--events-only")
		// Each tail has opened the database and is following once it
		// prints a new event: only then is the refusal sent.
		srv.Send("signed", "msg_warm", []byte(`{"type":"x"}`))
		await(t, "the tails to follow", func() bool {
			return strings.Contains(jsonOut.String(), "msg_warm") && strings.Contains(textOut.String(), "msg_warm") &&
				strings.Contains(only.String(), "msg_warm")
		})
		const forged = "v1,Zm9yZ2VkLXNpZ25hdHVyZS1ieXRlcy0wMTIzNDU2Nzg5"
		rep := srv.Post("signed", http.Header{"Webhook-Id": {"msg_forged"}, "Webhook-Timestamp": {strconvNow()},
			"Webhook-Signature": {forged}}, []byte(`{"type":"x"}`))
		if rep.Status != http.StatusUnauthorized {
			t.Fatalf("forged delivery: %+v", rep)
		}
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(jsonOut.String(), `"rejected"`) || !strings.Contains(textOut.String(), "REJECTED") {
			if time.Now().After(deadline) {
				rjs, err := srv.Svc.Store.Rejections(context.Background(), hookbox.RejectionFilter{})
				t.Fatalf("the refusal did not reach tail in a minute; the log holds %d (%v)\njson tail: %q\ntext tail: %q",
					len(rjs), err, jsonOut.String(), textOut.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		srv.Send("signed", "msg_good", []byte(`{"type":"x"}`))
		await(t, "the good event in --events-only", func() bool { return strings.Contains(only.String(), "msg_good") })
		for _, stop := range []func() error{stopJSON, stopText, stopOnly} {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		var line struct {
			Rejected struct {
				Source  string              `json:"source"`
				Status  int                 `json:"status"`
				Headers map[string][]string `json:"headers"`
			} `json:"rejected"`
		}
		var first string
		for _, l := range strings.Split(jsonOut.String(), "\n") {
			if strings.Contains(l, `"rejected"`) {
				first = l
				break
			}
		}
		if err := json.Unmarshal([]byte(first), &line); err != nil || line.Rejected.Status != http.StatusUnauthorized || line.Rejected.Source != "signed" {
			t.Fatalf("JSON line %q: %+v, %v", first, line, err)
		}
		if strings.Contains(jsonOut.String(), "Zm9yZ2VkLXNpZ25hdHVyZS1ieXRlcy0wMTIzNDU2Nzg5") {
			t.Error("tail printed a signature value")
		}
		if !strings.Contains(textOut.String(), "REJECTED  signed  401") {
			t.Errorf("text line: %q", textOut.String())
		}
		if strings.Contains(only.String(), "REJECTED") {
			t.Errorf("--events-only printed a refusal: %q", only.String())
		}
	})
}

func strconvNow() string { return strconv.FormatInt(time.Now().Unix(), 10) }

// TestTailMasksHeaders: tail --json shows an event's stored headers as
// events list --json does, signature and credential values masked and
// the others as received.
func TestTailMasksHeaders(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	srv := e2e.Start(t, tailConfig, dbURL, nil)
	const apiKey, signature = "tail-api-key-0123456789", "sha256=7461696c2d7369676e61747572652d76616c7565"
	out, interrupt := startTail(t, "--db", dbURL, "--json")
	rep := srv.Post("orders", http.Header{"X-Id": {"masked-1"}, "X-Type": {"order.paid"}, "X-Api-Key": {apiKey},
		"X-Hub-Signature-256": {signature}}, []byte(`{}`))
	if rep.Status != http.StatusAccepted {
		t.Fatalf("%+v", rep)
	}
	await(t, "the event printed", func() bool { return strings.Contains(out.String(), "masked-1") })
	if err := interrupt(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, apiKey) || strings.Contains(s, signature) {
		t.Fatalf("tail printed a credential: %s", s)
	}
	var e struct {
		Headers http.Header `json:"headers"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &e); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if e.Headers.Get("X-Api-Key") != redact.Mask || e.Headers.Get("X-Hub-Signature-256") != redact.Mask || e.Headers.Get("X-Type") != "order.paid" {
		t.Errorf("headers %v", e.Headers)
	}
}

// TestTailShowsEventsOfHostBehind: tail shows an event stored after it
// started by a host whose clock is 45 s behind tail's (its receipt time
// is 45 s in tail's past). tail looked back 30 s by receipt time, so it
// never showed such an event; its window is now on its own clock, by id.
func TestTailShowsEventsOfHostBehind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ingestOne := func(id string, at time.Time) {
			t.Helper()
			d := storetest.Delivery("orders", id)
			d.ReceivedAt = at
			if _, err := s.Ingest(context.Background(), []hookbox.Delivery{d}); err != nil {
				t.Fatal(err)
			}
		}
		ingestOne("before-tail", time.Now())
		out := &syncbuf.Buffer{}
		tl := &tailer{st: s, out: out, show: func(h http.Header) http.Header { return h }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.run(ctx, 1, 20*time.Millisecond) }()
		awaitOutput := func(what string) {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(out.String(), what) {
				if time.Now().After(deadline) {
					t.Fatalf("tail did not print %s within 20 s: %q", what, out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		awaitOutput("before-tail") // the newest, printed after tail's first look
		ingestOne("from-slow-host", time.Now().Add(-45*time.Second))
		ingestOne("from-right-host", time.Now())
		awaitOutput("from-right-host")
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := out.String(); !strings.Contains(got, "from-slow-host") {
			t.Errorf("tail printed %q: the event received by a host whose clock is 45 s behind is not shown", got)
		}
	})
}

// TestTailShowsLateCommitBelowAFullPage: on PostgreSQL an ingest
// transaction may draw its id and commit it after more than a page (500)
// of higher ids were committed and shown. tail looks below the newest id
// for tailWindow for that, but each look stopped at the first page it
// had seen all of, so the late event was never shown. A look now reads
// one page more below those, every tailDeepEvery.
func TestTailShowsLateCommitBelowAFullPage(t *testing.T) {
	s := dbtest.Open(t, pgtest.URL(t))
	ctx := context.Background()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("orders", "before-tail")}); err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	tl := &tailer{st: s, out: out, show: func(h http.Header) http.Header { return h }}
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tl.run(tctx, 1, 20*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	await := func(what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second) // well within tailWindow
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("tail did not print %s within 15 s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	await("before-tail")
	// A slow ingest transaction draws its id first, while 600 deliveries
	// are stored and shown.
	tx, err := s.(hookbox.IngestBeginner).BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(ctx, []hookbox.Delivery{storetest.Delivery("orders", "late-commit")}); err != nil {
		t.Fatal(err)
	}
	var ds []hookbox.Delivery
	for i := range 600 {
		ds = append(ds, storetest.Delivery("orders", fmt.Sprint("bulk-", i)))
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	await("bulk-599")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	await("late-commit")
}

// TestTailLookFailingMidwayLosesNothing: a look that reads a full page of
// new events and then fails on the next page marks none of them seen:
// the next look shows them all. The failed look used to mark the first
// page's events seen without showing them, which was harmless while a
// failed look ended tail, not once tail looks again.
func TestTailLookFailingMidwayLosesNothing(t *testing.T) {
	type row struct{ id int64 }
	key := func(r row) (int64, time.Time) { return r.id, time.Now() }
	var f follow
	if _, err := freshIn(&f, true, func(int64) ([]row, error) { return nil, nil }, key); err != nil {
		t.Fatal(err)
	}
	// Ids tailPage+1 … 1, newest first, a page at a time.
	page := func(before int64) []row {
		if before == 0 {
			before = tailPage + 2
		}
		var rows []row
		for id := before - 1; id > 0 && len(rows) < tailPage; id-- {
			rows = append(rows, row{id})
		}
		return rows
	}
	_, err := freshIn(&f, false, func(before int64) ([]row, error) {
		if before != 0 {
			return nil, errors.New("the connection dropped")
		}
		return page(before), nil
	}, key)
	if err == nil {
		t.Fatal("the failing look did not fail")
	}
	got, err := freshIn(&f, false, func(before int64) ([]row, error) { return page(before), nil }, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != tailPage+1 {
		t.Errorf("the look after the failed one shows %d events, want all %d", len(got), tailPage+1)
	}
}

// TestTailKeepsLooking: tail on PostgreSQL outlives the database going
// away and a connection that stalls: it warns once on stderr, looks again
// with pauses, says when it reads again, and prints what was stored
// meanwhile. It ended at the first failed look (exit 1), and a stalled
// connection left it waiting without a word.
func TestTailKeepsLooking(t *testing.T) {
	dbURL := pgtest.URL(t)
	st := dbtest.Open(t, dbURL)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	out, interrupt := startTail(t, "--db", viaProxy, "--db-timeout", "1s", "--events-only")
	cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now(), "before")
	await(t, "tail showing the first event", func() bool { return strings.Contains(out.String(), "before") })

	proxy.BlackHole() // stalled: each look must end at its deadline
	await(t, "tail warning that it cannot read", func() bool { return strings.Contains(out.String(), "cannot read the database") })
	proxy.Cut() // refused: looks fail at once
	cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now(), "during")
	proxy.Restore()
	await(t, "tail reading again", func() bool { return strings.Contains(out.String(), "reading the database again") })
	await(t, "tail showing the event stored meanwhile", func() bool { return strings.Contains(out.String(), "during") })
	if err := interrupt(); err != nil {
		t.Errorf("tail: %v", err)
	}
	if s := out.String(); strings.Count(s, "cannot read the database") != 1 || strings.Contains(s, "tail ended early") {
		t.Errorf("tail's output: want one warning, and no early end:\n%s", s)
	} else {
		t.Logf("tail's output:\n%s", s)
	}
}

// rejectionsFail is a store whose refused deliveries cannot be read after
// the first look (a role without SELECT on rejected), its events can.
type rejectionsFail struct {
	dbtest.Store
	calls int
}

func (s *rejectionsFail) Rejections(ctx context.Context, f hookbox.RejectionFilter) ([]hookbox.Rejection, error) {
	s.calls++
	if s.calls > 1 {
		return nil, errors.New("permission denied for table rejected")
	}
	return s.Store.Rejections(ctx, f)
}

// TestTailHalfFailingLooksWarnOnce: when events can be read and refused
// deliveries cannot, tail warns once and backs off; each look wrote both
// "reading the database again" and "cannot read the database" and reset
// its pause, two lines per interval for good.
func TestTailHalfFailingLooksWarnOnce(t *testing.T) {
	s := &rejectionsFail{Store: dbtest.Open(t, dbtest.SQLiteURL(t))}
	errOut := &syncbuf.Buffer{}
	tl := &tailer{st: s, out: &syncbuf.Buffer{}, rejections: true, errOut: errOut, show: func(h http.Header) http.Header { return h }}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := tl.run(ctx, 0, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got := errOut.String()
	if strings.Count(got, "cannot read the database") != 1 || strings.Contains(got, "reading the database again") {
		t.Errorf("looks whose refused deliveries fail: want one warning and no recovery line, got:\n%s", got)
	}
}
