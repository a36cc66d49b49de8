package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// rejectionTests are the cases of the rejected-deliveries log, run by Run.
var rejectionTests = map[string]func(*testing.T, hookbox.Store){
	"RejectionsKeepWhatWasSent": testRejectionsKeep,
	"RejectionsListAndFilter":   testRejectionsList,
	"RejectionsBoundedByCount":  testRejectionsBoundedByCount,
	"RejectionsBoundedByAge":    testRejectionsBoundedByAge,
	"RejectionAdmitted":         testRejectionAdmitted,
	"Overview":                  testOverview,
}

// Rejection builds a rejected delivery with a small complete body, for
// tests.
func Rejection(source string, status int, at time.Time) hookbox.Rejection {
	body := []byte(`{"type":"test.event"}`)
	return hookbox.Rejection{
		Source: source, ReceivedAt: at, RemoteAddr: "192.0.2.7:4711", Status: status,
		Reason: "no signature matches", Header: http.Header{"Content-Type": {"application/json"}, "Webhook-Signature": {"v1,abc"}},
		BodySize: int64(len(body)), Body: body, BodyComplete: true,
	}
}

func addRejections(t *testing.T, s hookbox.Store, b hookbox.RejectionBounds, rs ...hookbox.Rejection) int {
	t.Helper()
	n, err := s.AddRejections(context.Background(), rs, b)
	if err != nil {
		t.Fatalf("AddRejections: %v", err)
	}
	return n
}

func listRejections(t *testing.T, s hookbox.Store, f hookbox.RejectionFilter) []hookbox.Rejection {
	t.Helper()
	rs, err := s.Rejections(context.Background(), f)
	if err != nil {
		t.Fatalf("Rejections: %v", err)
	}
	return rs
}

func testRejectionsKeep(t *testing.T, s hookbox.Store) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	full := Rejection("polar", http.StatusUnauthorized, at)
	full.Body = []byte{0, 0xff, '<', 's', '>'} // raw bytes, not text
	full.BodySize = 5
	empty := Rejection("polar", http.StatusBadRequest, at)
	empty.Body, empty.BodySize = []byte{}, 0
	unread := hookbox.Rejection{Source: "nope", UnknownSource: true, ReceivedAt: at, Status: http.StatusNotFound,
		Reason: "unknown source", BodySize: -1}
	addRejections(t, s, hookbox.RejectionBounds{}, full, empty, unread)

	rs := listRejections(t, s, hookbox.RejectionFilter{})
	if len(rs) != 3 {
		t.Fatalf("listed %d rejections, want 3", len(rs))
	}
	got, err := s.Rejection(context.Background(), rs[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != "polar" || got.Status != 401 || !got.ReceivedAt.Equal(at) || got.RemoteAddr != full.RemoteAddr ||
		got.Reason != full.Reason || got.Header.Get("Webhook-Signature") != "v1,abc" || got.BodySize != 5 ||
		!bytes.Equal(got.Body, full.Body) || !got.BodyComplete || got.UnknownSource || got.AdmittedEventID != 0 {
		t.Errorf("read back %+v, want %+v", got, full)
	}
	if got, _ := s.Rejection(context.Background(), rs[1].ID); got.Body == nil || len(got.Body) != 0 || !got.BodyComplete {
		t.Errorf("an empty complete body reads back as %#v (complete %v), want zero bytes", got.Body, got.BodyComplete)
	}
	if got, _ := s.Rejection(context.Background(), rs[0].ID); got.Body != nil || got.BodyComplete || !got.UnknownSource ||
		got.Source != "nope" || got.BodySize != -1 {
		t.Errorf("an unread body reads back as %+v", got)
	}
	if _, err := s.Rejection(context.Background(), rs[0].ID+100); !errors.Is(err, hookbox.ErrNotFound) {
		t.Errorf("missing rejection: %v, want ErrNotFound", err)
	}
}

func testRejectionsList(t *testing.T, s hookbox.Store) {
	now := time.Now()
	addRejections(t, s, hookbox.RejectionBounds{},
		Rejection("a", 401, now.Add(-2*time.Hour)), Rejection("b", 401, now), Rejection("a", 413, now), Rejection("a", 401, now))
	rs := listRejections(t, s, hookbox.RejectionFilter{})
	if len(rs) != 4 || rs[0].ID < rs[1].ID || rs[0].Body != nil {
		t.Fatalf("listing: %d rows, newest first without bodies expected: %+v", len(rs), rs)
	}
	if rs := listRejections(t, s, hookbox.RejectionFilter{WithBody: true}); rs[0].Body == nil {
		t.Errorf("WithBody lists no body")
	}
	for _, c := range []struct {
		f    hookbox.RejectionFilter
		want int
	}{
		{hookbox.RejectionFilter{Source: "a"}, 3},
		{hookbox.RejectionFilter{Source: "a", Status: 401}, 2},
		{hookbox.RejectionFilter{Since: now.Add(-time.Hour)}, 3},
		{hookbox.RejectionFilter{BeforeID: rs[1].ID}, 2},
		{hookbox.RejectionFilter{Limit: 1}, 1},
	} {
		if got := listRejections(t, s, c.f); len(got) != c.want {
			t.Errorf("filter %+v: %d rows, want %d", c.f, len(got), c.want)
		}
	}
}

func testRejectionsBoundedByCount(t *testing.T, s hookbox.Store) {
	b := hookbox.RejectionBounds{MaxCount: 10}
	trimmed := 0
	for i := range 5 {
		var rs []hookbox.Rejection
		for j := range 7 {
			r := Rejection("flood", 401, time.Now())
			r.Reason = fmt.Sprintf("r%d", i*7+j)
			rs = append(rs, r)
		}
		trimmed += addRejections(t, s, b, rs...)
		if n := len(listRejections(t, s, hookbox.RejectionFilter{Limit: 1000})); n > 10 {
			t.Fatalf("after write %d: %d rows, bound is 10", i, n)
		}
	}
	rs := listRejections(t, s, hookbox.RejectionFilter{Limit: 1000})
	if len(rs) != 10 || trimmed != 25 || rs[0].Reason != "r34" || rs[9].Reason != "r25" {
		t.Errorf("kept %d rows (%s … %s), trimmed %d; want the newest 10 (r34 … r25), 25 trimmed",
			len(rs), rs[0].Reason, rs[len(rs)-1].Reason, trimmed)
	}
}

func testRejectionsBoundedByAge(t *testing.T, s hookbox.Store) {
	now := time.Now()
	addRejections(t, s, hookbox.RejectionBounds{}, Rejection("a", 401, now.Add(-48*time.Hour)), Rejection("a", 401, now.Add(-time.Hour)))
	n := addRejections(t, s, hookbox.RejectionBounds{MaxCount: 100, Since: now.Add(-24 * time.Hour)}, Rejection("a", 401, now))
	if rs := listRejections(t, s, hookbox.RejectionFilter{}); n != 1 || len(rs) != 2 {
		t.Errorf("trimmed %d, kept %d; want the one older than a day trimmed", n, len(rs))
	}
}

func testRejectionAdmitted(t *testing.T, s hookbox.Store) {
	addRejections(t, s, hookbox.RejectionBounds{}, Rejection("a", 401, time.Now()), Rejection("a", 401, time.Now()))
	rs := listRejections(t, s, hookbox.RejectionFilter{})
	ev := ingest(t, s, Delivery("a", "admitted"))[0]
	if err := s.SetRejectionAdmitted(context.Background(), rs[0].ID, ev.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Rejection(context.Background(), rs[0].ID)
	if err != nil || got.AdmittedEventID != ev.ID {
		t.Errorf("admitted rejection reads %+v, %v; want event %d", got, err, ev.ID)
	}
	if open := listRejections(t, s, hookbox.RejectionFilter{Unadmitted: true}); len(open) != 1 || open[0].ID != rs[1].ID {
		t.Errorf("unadmitted: %+v, want only %d", open, rs[1].ID)
	}
	if err := s.SetRejectionAdmitted(context.Background(), rs[0].ID+100, ev.ID); !errors.Is(err, hookbox.ErrNotFound) {
		t.Errorf("admitting a missing rejection: %v, want ErrNotFound", err)
	}
}

// SignedRejections logs n deliveries to source, each signed as cfg
// signs (so that a re-check with cfg's secret admits them), as refused
// with 401, and returns the log newest first, as a re-check reads it.
// Delivery i has the id "delivery-i" (the id header of cfg's scheme)
// and the body {"type":"order.paid","n":i}.
func SignedRejections(t testing.TB, s hookbox.RejectionStore, cfg verify.Config, source string, n int) []hookbox.Rejection {
	t.Helper()
	ctx := context.Background()
	rjs := make([]hookbox.Rejection, 0, n)
	for i := range n {
		body := []byte(fmt.Sprintf(`{"type":"order.paid","n":%d}`, i))
		hdr, err := verify.Sign(cfg, body, fmt.Sprint("delivery-", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rjs = append(rjs, hookbox.Rejection{Source: source, ReceivedAt: time.Now(), RemoteAddr: "192.0.2.1", Status: 401,
			Reason: "no signature matches", Header: hdr, Body: body, BodySize: int64(len(body)), BodyComplete: true})
	}
	if _, err := s.AddRejections(ctx, rjs, hookbox.RejectionBounds{}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Rejections(ctx, hookbox.RejectionFilter{Limit: n + 1})
	if err != nil || len(kept) != n {
		t.Fatalf("%d rejections kept (%v), want %d", len(kept), err, n)
	}
	return kept
}
