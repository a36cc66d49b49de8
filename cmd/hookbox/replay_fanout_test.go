package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestReplayFanOutListsDeliveriesLeftAlone: `hookbox replay ID
// --include-done` of an event fanned out to a (in flight) and b (done)
// replays b and lists a as skipped, with its event, target and why, in
// the text and in --json's skipped and skipped_reasons. It exits 0, as a
// replay of a named event in flight does (README: nothing to do is not a
// failure). Before, skipped was [] and nothing named a.
func TestReplayFanOutListsDeliveriesLeftAlone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		rs, err := st.Ingest(ctx, []hookbox.Delivery{{Source: "fo", DeliveryID: "1", Header: http.Header{"Content-Type": {"application/json"}},
			Payload: []byte(`{}`), ReceivedAt: time.Now(), FanOut: true, Routes: []hookbox.Route{{Target: "a"}, {Target: "b"}}}})
		if err != nil {
			t.Fatal(err)
		}
		parent := rs[0].ID
		claim := func(q string) hookbox.Event {
			evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: "w-" + q, Limit: 1, Lease: time.Minute, Sources: []string{q}})
			if err != nil || len(evs) != 1 {
				t.Fatalf("claim %s: %+v, %v", q, evs, err)
			}
			return evs[0]
		}
		a, b := claim("fo/a"), claim("fo/b")
		now := time.Now()
		if _, err := st.Finish(ctx, []hookbox.Outcome{{ID: b.ID, Owner: b.LeaseOwner, Attempt: b.Attempts,
			Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
		// events show gives the number --if-attempts compares: the sum
		// over the deliveries (a running 1, b done 1), not the event's own
		// 0, which --if-attempts refused as "changed since you looked".
		if out := mustCLI(t, "events", "show", fmt.Sprint(parent), "--db", dbURL); !strings.Contains(out, "2 (its deliveries' attempts") {
			t.Errorf("events show of the event with targets:\n%s\nwant attempts 2, its deliveries'", out)
		}
		why := fmt.Sprintf("delivery of event %d to target a: it is being worked right now", parent)
		code, out, errOut := runExit(t, "replay", fmt.Sprint(parent), "--include-done", "--dry-run", "--db", dbURL)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("skipped %d: %s", a.ID, why)) {
			t.Errorf("dry run: exit %d, %q %s; want 0, a skipped as being worked", code, out, errOut)
		}
		code, out, errOut = runExit(t, "replay", fmt.Sprint(parent), "--include-done", "--json", "--db", dbURL)
		var rep struct {
			Replayed []int64           `json:"replayed"`
			Skipped  []int64           `json:"skipped"`
			Reasons  map[string]string `json:"skipped_reasons"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !slices.Equal(rep.Replayed, []int64{b.ID}) ||
			!slices.Equal(rep.Skipped, []int64{a.ID}) || rep.Reasons[fmt.Sprint(a.ID)] != why {
			t.Errorf("replay --json: exit %d, %s %s; want b replayed, a skipped: %q", code, out, errOut, why)
		}
	})
}

// TestReplayIfAttempts: `hookbox replay ID --include-done --if-attempts N`
// replays a done event while its attempts are N; run again after the
// replay's run it skips the event as changed since you looked and exits
// 1. --if-attempts with a filter, or with two ids, is a usage error.
func TestReplayIfAttempts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		id := cliSeed(t, st, "gh", "push", hookbox.StatusDone, time.Now(), "d1")[0]
		seen, err := st.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"replay", fmt.Sprint(id), "--include-done", "--if-attempts", fmt.Sprint(seen.Attempts), "--db", dbURL}
		if code, out, errOut := runExit(t, args...); code != 0 || !strings.Contains(out, fmt.Sprintf("replayed 1 event: %d", id)) {
			t.Fatalf("first replay: exit %d, %q %s", code, out, errOut)
		}
		ctx := context.Background()
		evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{"gh"}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim: %+v, %v", evs, err)
		}
		now := time.Now()
		if _, err := st.Finish(ctx, []hookbox.Outcome{{ID: id, Owner: "w", Attempt: evs[0].Attempts, Status: hookbox.StatusDone,
			StartedAt: now, FinishedAt: now}}); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runExit(t, args...)
		if code != 1 || !strings.Contains(out, fmt.Sprintf("skipped %d: it changed since you looked", id)) {
			t.Errorf("the same replay after the run: exit %d, %q %s; want 1, skipped as changed since you looked", code, out, errOut)
		}
		if e, err := st.Event(ctx, id); err != nil || e.Status != hookbox.StatusDone || e.Attempts != seen.Attempts+1 {
			t.Errorf("after it: %+v, %v; want done after one more attempt", e, err)
		}
		for _, bad := range [][]string{
			{"replay", "--source", "gh", "--if-attempts", "1", "--db", dbURL},
			{"replay", fmt.Sprint(id), "99", "--if-attempts", "1", "--db", dbURL},
		} {
			if code, out, errOut := runExit(t, bad...); code != 2 || !strings.Contains(out+errOut, "--if-attempts") {
				t.Errorf("%v: exit %d, %q %s; want a usage error (2)", bad, code, out, errOut)
			}
		}
	})
}
