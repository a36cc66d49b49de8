package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// testOverview: the overview counts each source's events by status, finds
// the oldest due one, and counts this minute's stored events and kept
// rejections, unknown source names summed under "".
func testOverview(t *testing.T, s hookbox.Store) {
	// The middle of the last whole minute, and the overview made in it:
	// no minute boundary can fall between them.
	now := time.Now().Truncate(time.Minute).Add(-30 * time.Second)
	at := func(d hookbox.Delivery) hookbox.Delivery {
		d.ReceivedAt = now
		return d
	}
	Seed(t, s, hookbox.StatusDead, now, "gave up", at(Delivery("a", "1")), at(Delivery("a", "2")))
	old := Delivery("a", "3")
	old.ReceivedAt = now.Add(-3 * time.Hour)
	ingest(t, s, old, at(Delivery("b", "1")))
	// A retry due 3 hours ago: a new event is due when stored, which on
	// PostgreSQL is the database's clock at the ingest, not its receipt.
	evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: "overview", Limit: 1, Lease: time.Minute, Sources: []string{"a"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %v, %v", evs, err)
	}
	if errs, err := s.Finish(context.Background(), []hookbox.Outcome{outcome(evs[0], hookbox.StatusPending, old.ReceivedAt)}); err != nil || errs[0] != nil {
		t.Fatalf("finish: %v, %v", err, errs)
	}
	unknown := Rejection("nope", 404, now)
	unknown.UnknownSource = true
	addRejections(t, s, hookbox.RejectionBounds{}, Rejection("b", 401, now), unknown, Rejection("b", 401, now.Add(-2*time.Hour)))

	ov, err := s.Overview(context.Background(), now.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hookbox.SourceOverview{}
	for _, o := range ov {
		got[o.Source] = o
	}
	last := hookbox.OverviewMinutes - 1
	a, b, u := got["a"], got["b"], got[""]
	if len(ov) != 3 || ov[0].Source != "" || ov[1].Source != "a" {
		t.Fatalf("overview sources: %+v", ov)
	}
	if a.ByStatus[hookbox.StatusDead] != 2 || a.ByStatus[hookbox.StatusPending] != 1 || a.Stored[last] != 2 {
		t.Errorf("source a: %+v", a)
	}
	if !a.OldestDue.Equal(old.ReceivedAt.Truncate(time.Millisecond)) && a.OldestDue.Sub(old.ReceivedAt).Abs() > time.Second {
		t.Errorf("source a's oldest due: %v, want %v", a.OldestDue, old.ReceivedAt)
	}
	if b.ByStatus[hookbox.StatusPending] != 1 || b.Stored[last] != 1 || b.Rejected[last] != 1 || sum(b.Rejected[:]) != 1 {
		t.Errorf("source b: %+v", b)
	}
	if u.Rejected[last] != 1 || len(u.ByStatus) != 0 {
		t.Errorf("unknown sources: %+v", u)
	}
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}
