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
	"github.com/hookbox/hookbox/worker"
)

// TestEventsShowNotRun: an event whose last attempt's worker stopped
// without an outcome (its process died while the work ran) is ended dead,
// unrun, by the next worker that claims it. events list and events show
// print the attempts it made, max_attempts (they printed one more, "2 of
// 1", the count of the claim that ended it), and show lists the lost
// attempt as unknown, then why it was not run again; events skip
// --if-attempts takes the count they printed.
func TestEventsShowNotRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		ctx := context.Background()
		rs, err := st.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("crashy", "c-1")})
		if err != nil {
			t.Fatal(err)
		}
		id := rs[0].ID
		// A process claimed it, for its one attempt, and died running it:
		// the lease ends with nothing recorded.
		if evs, err := st.Claim(ctx, hookbox.ClaimParams{Owner: "died", Limit: 1, Lease: time.Millisecond,
			Sources: []string{"crashy"}}); err != nil || len(evs) != 1 {
			t.Fatalf("claim = %d events, %v", len(evs), err)
		}
		ran := make(chan struct{}, 1)
		p := worker.New(st, worker.Options{PollInterval: 10 * time.Millisecond})
		p.SetPolicy("crashy", worker.Policy{MaxAttempts: 1, Timeout: 10 * time.Second})
		p.Route("crashy", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			ran <- struct{}{}
			return nil
		}))
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(ctx) })
		await(t, "the event dead", func() bool {
			e, err := st.Event(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			p.Notify()
			return e.Status == hookbox.StatusDead
		})
		select {
		case <-ran:
			t.Fatal("the event past its last attempt was run")
		default:
		}

		var evs []hookbox.Event
		out := mustCLI(t, "events", "list", "--status", "dead", "--json", "--db", dbURL)
		if err := json.Unmarshal([]byte(out), &evs); err != nil || len(evs) != 1 || evs[0].ID != id || evs[0].Attempts != 1 {
			t.Fatalf("events list --json = %s (%v); want event %d with attempts 1", out, err, id)
		}
		show := mustCLI(t, "events", "show", fmt.Sprint(id), "--db", dbURL)
		if !strings.Contains(show, "\nattempts ") || strings.Fields(show[strings.Index(show, "\nattempts "):])[1] != "1" {
			t.Errorf("events show: attempts is not 1:\n%s", show)
		}
		var rows []string
		for _, line := range strings.Split(show[strings.LastIndex(show, "\nattempts\n")+1:], "\n")[2:] {
			if f := strings.Fields(line); len(f) >= 2 {
				rows = append(rows, f[0]+" "+f[1])
			}
		}
		if got, want := strings.Join(rows, ", "), "1 unknown, 1 not_run"; got != want || !strings.Contains(show, "not run again") {
			t.Errorf("events show attempts %q, want %q and why it was not run again:\n%s", got, want, show)
		}

		if code, _, errOut := runExit(t, "events", "skip", fmt.Sprint(id), "--if-attempts", "2", "--db", dbURL); code != 1 {
			t.Errorf("skip --if-attempts 2 (the count of the claim that ended it): exit %d, %q; want 1, refused", code, errOut)
		}
		if code, out, errOut := runExit(t, "events", "skip", fmt.Sprint(id), "--if-attempts", "1", "--db", dbURL); code != 0 {
			t.Errorf("skip --if-attempts 1 (as printed): exit %d, %q %q; want 0", code, out, errOut)
		}
	})
}
