package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestEventsSkip: a dead delivery the app refuses for good held its order
// key for ever (a replay died again); events skip ends it, releasing the
// key, and events show prints who skipped it and why. A pending delivery
// is refused (exit 1, nothing changes), a missing id exits 1, a bad id 2,
// and a second skip exits 0 saying nothing changed.
func TestEventsSkip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		ids := storetest.SeedHeldKey(t, st, "shop", "app", "cust-9", "forward: 410 Gone", "w1", "w2")
		dead, waiting := fmt.Sprint(ids[0]), fmt.Sprint(ids[1])

		if code, _, errOut := runExit(t, "events", "skip", waiting, "--db", dbURL); code != 1 ||
			!strings.Contains(errOut, "is pending: only a dead delivery can be skipped") {
			t.Fatalf("skip of a pending delivery: exit %d, %q", code, errOut)
		}
		if code, _, errOut := runExit(t, "events", "skip", "999999", "--db", dbURL); code != 1 || !strings.Contains(errOut, "no event 999999") {
			t.Fatalf("skip of a missing id: exit %d, %q", code, errOut)
		}
		if code, _, _ := runExit(t, "events", "skip", "x", "--db", dbURL); code != 2 {
			t.Fatalf("skip x: exit %d, want 2", code)
		}

		code, out, errOut := runExit(t, "events", "skip", dead, "--reason", "customer deleted; 410 for good", "--db", dbURL)
		if code != 0 || !strings.Contains(out, `no longer holds order key "cust-9"`) {
			t.Fatalf("skip: exit %d, %q %q", code, out, errOut)
		}
		show := mustCLI(t, "events", "show", dead, "--db", dbURL)
		if !strings.Contains(show, "\nstatus ") || !strings.Contains(strings.Fields(show[strings.Index(show, "\nstatus "):])[1], "dead") {
			t.Errorf("events show after the skip: status is not dead:\n%s", show)
		}
		for _, want := range []string{"skipped by an operator (hookbox events skip", "customer deleted; 410 for good", "  skip  "} {
			if !strings.Contains(show, want) {
				t.Errorf("events show after the skip lacks %q:\n%s", want, show)
			}
		}
		evs, err := st.Claim(context.Background(), hookbox.ClaimParams{Owner: "cli-skip", Limit: 5, Lease: time.Minute,
			Sources: []string{"shop/app"}, ByKey: true})
		if err != nil || len(evs) != 1 || evs[0].ID != ids[1] {
			t.Fatalf("claim after the skip = %v, %v; want the waiting delivery", evs, err)
		}

		out = mustCLI(t, "events", "skip", dead, "--json", "--db", dbURL)
		var res hookbox.SkipResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Already || res.ID != ids[0] {
			t.Fatalf("second skip --json = %q (%v)", out, err)
		}
	})
}

// TestHeldKeyIsVisible: a delivery waiting behind a dead one of its order
// key read "pending" with no reason, and nothing listed the deliveries of
// one key. events show now prints its order key and the dead delivery it
// waits behind, with both ways out; events list has --key and a KEY
// column when a listed delivery has a key (and none otherwise).
func TestHeldKeyIsVisible(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ids := storetest.SeedHeldKey(t, st, "shop", "app", "cust-1", "forward: 410 Gone", "a1", "a2", "a3")
		other := storetest.SeedHeldKey(t, st, "shop", "app", "cust-2", "forward: 410 Gone", "b1")
		cliSeed(t, st, "plain", "t", hookbox.StatusDead, time.Now(), "p1")

		show := mustCLI(t, "events", "show", fmt.Sprint(ids[2]), "--db", dbURL)
		for _, want := range []string{"cust-1", fmt.Sprintf("dead delivery %d, the first of its order key", ids[0]),
			fmt.Sprintf("hookbox replay %d", ids[0]), fmt.Sprintf("hookbox events skip %d --if-attempts N", ids[0])} {
			if !strings.Contains(show, want) {
				t.Errorf("events show of a waiting delivery lacks %q:\n%s", want, show)
			}
		}
		if show := mustCLI(t, "events", "show", fmt.Sprint(other[0]), "--db", dbURL); strings.Contains(show, "waits behind") {
			t.Errorf("the dead delivery itself reads as waiting:\n%s", show)
		}

		out := mustCLI(t, "events", "list", "--key", "cust-1", "--db", dbURL)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "KEY") {
			t.Fatalf("events list --key cust-1:\n%s", out)
		}
		for _, l := range lines[1:] {
			if !strings.HasSuffix(l, "cust-1") {
				t.Errorf("a row of events list --key cust-1 is not of cust-1: %q", l)
			}
		}
		if got := listIDs(t, dbURL, "--key", "cust-1", "--status", "dead"); len(got) != 1 || got[0] != ids[0] {
			t.Errorf("events list --key cust-1 --status dead = %v, want [%d]", got, ids[0])
		}
		if out := mustCLI(t, "events", "list", "--source", "plain", "--db", dbURL); strings.Contains(out, "KEY") {
			t.Errorf("a KEY column with no keyed row:\n%s", out)
		}
	})
}

// TestEventsSkipIfAttempts: events skip --if-attempts N skips the
// delivery only while its attempts are still N. After it was replayed and
// died again, the count seen before exits 1 saying changed since you
// looked, and nothing changes (its last error and key as they were); the
// count it has now skips it. A negative count is a usage error (exit 2).
// Before, the flag did not exist.
func TestEventsSkipIfAttempts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		ctx := context.Background()
		ids := storetest.SeedHeldKey(t, st, "shop", "app", "cust-3", "forward: 410 Gone", "f1", "f2")
		dead := fmt.Sprint(ids[0])
		seen, err := st.Event(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := runExit(t, "events", "skip", dead, "--if-attempts", "-1", "--db", dbURL); code != 2 {
			t.Fatalf("skip --if-attempts -1: exit %d, %q; want 2", code, errOut)
		}
		storetest.DieAgain(t, st, ids[0], "forward: 410 Gone, again")
		now, err := st.Event(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runExit(t, "events", "skip", dead, "--reason", "gone", "--if-attempts", fmt.Sprint(seen.Attempts), "--db", dbURL)
		if code != 1 || !strings.Contains(errOut, "changed since you looked") {
			t.Fatalf("skip --if-attempts %d after the delivery died again: exit %d, %q %q; want 1, changed since you looked", seen.Attempts, code, out, errOut)
		}
		if e, err := st.Event(ctx, ids[0]); err != nil || e.LastError != now.LastError || e.OrderKey != "cust-3" {
			t.Fatalf("after the refused skip: %+v, %v; want it as it was", e, err)
		}
		code, out, errOut = runExit(t, "events", "skip", dead, "--reason", "gone", "--if-attempts", fmt.Sprint(now.Attempts), "--db", dbURL)
		if code != 0 || !strings.Contains(out, `no longer holds order key "cust-3"`) {
			t.Fatalf("skip --if-attempts %d: exit %d, %q %q", now.Attempts, code, out, errOut)
		}
	})
}
