package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/worker"
)

func eventStatus(t *testing.T, st hookbox.Store, id int64) hookbox.Status {
	t.Helper()
	e, err := st.Event(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Status
}

func waitEventStatus(t *testing.T, st hookbox.Store, id int64, want hookbox.Status) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for eventStatus(t, st, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s, want %s", id, eventStatus(t, st, id), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func replayJSON(t *testing.T, args ...string) server.ReplayReply {
	t.Helper()
	out := mustCLI(t, append([]string{"replay", "--json"}, args...)...)
	var r server.ReplayReply
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json %q: %v", out, err)
	}
	return r
}

// TestReplayDeadEndsDone runs a worker pool whose handler fails until the
// cause is fixed: the event goes dead, `hookbox replay ID` puts it back,
// and the pool works it to done.
func TestReplayDeadEndsDone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		var fixed atomic.Bool
		pool := worker.New(st, worker.Options{PollInterval: 20 * time.Millisecond})
		pool.SetPolicy("gh", worker.Policy{MaxAttempts: 1})
		pool.Handle("gh", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			if !fixed.Load() {
				return errors.New("downstream is down")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		if err := pool.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); pool.Stop(context.Background()) })

		ids := cliSeed(t, st, "gh", "push", hookbox.StatusPending, time.Now(), "1", "2")
		pool.Notify()
		for _, id := range ids {
			waitEventStatus(t, st, id, hookbox.StatusDead)
		}
		fixed.Store(true)

		// Dry run first: nothing changes.
		out := mustCLI(t, "replay", fmt.Sprint(ids[0]), "--db", dbURL, "--dry-run")
		if !strings.Contains(out, "would replay 1 event") || !strings.Contains(out, "nothing was changed") {
			t.Errorf("dry run output %q", out)
		}
		time.Sleep(100 * time.Millisecond)
		if eventStatus(t, st, ids[0]) != hookbox.StatusDead {
			t.Fatalf("--dry-run replayed the event")
		}

		out = mustCLI(t, "replay", fmt.Sprint(ids[0]), "--db", dbURL)
		if !strings.Contains(out, fmt.Sprintf("replayed 1 event: %d", ids[0])) {
			t.Errorf("replay output %q", out)
		}
		waitEventStatus(t, st, ids[0], hookbox.StatusDone)
		if eventStatus(t, st, ids[1]) != hookbox.StatusDead {
			t.Errorf("an event not named was replayed")
		}
		at, err := st.Attempts(context.Background(), ids[0])
		// The replay is marked, and attempt numbers go on: 1 dead, the
		// replay mark, 2 done.
		if err != nil || len(at) != 3 || at[0].Outcome != "dead" || at[1].Outcome != hookbox.AttemptReplay ||
			at[2].Outcome != "done" || at[2].Attempt != 2 {
			t.Errorf("attempts %+v, %v", at, err)
		}
	})
}

func TestReplayCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		now := time.Now()
		dead := cliSeed(t, st, "polar", "order.paid", hookbox.StatusDead, now, "d1", "d2")
		done := cliSeed(t, st, "polar", "order.paid", hookbox.StatusDone, now, "ok1")
		otherDead := cliSeed(t, st, "github", "push", hookbox.StatusDead, now, "g1")
		inFlight := cliSeed(t, st, "stripe", "charge", hookbox.StatusProcessing, now, "s1")

		// Done needs --include-done; in flight and missing are skipped,
		// each with its reason.
		out := mustCLI(t, "replay", fmt.Sprint(done[0]), fmt.Sprint(inFlight[0]), "--db", dbURL)
		for _, want := range []string{"nothing to replay", "--include-done", "being worked"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		// A bulk replay of done events without --include-done matches none,
		// and says why (it said only "nothing to replay").
		out = mustCLI(t, "replay", "--status", "done", "--source", "polar", "--db", dbURL)
		if !strings.Contains(out, "nothing to replay") || !strings.Contains(out, "--include-done") {
			t.Errorf("replay --status done without --include-done:\n%s\nwant it to name --include-done", out)
		}
		// A missing id fails the command, naming the id, with or without
		// others beside it.
		for _, args := range [][]string{{"424242"}, {fmt.Sprint(done[0]), "424242"}, {"424242", "--json"}} {
			out, _, err := runCLI(t, append(append([]string{"replay"}, args...), "--db", dbURL)...)
			if err == nil || !strings.Contains(err.Error(), "no such event: 424242") {
				t.Errorf("replay %v: err %v, output %q; want a non-zero exit saying there is no event 424242", args, err, out)
			}
		}
		if eventStatus(t, st, done[0]) != hookbox.StatusDone || eventStatus(t, st, inFlight[0]) != hookbox.StatusProcessing {
			t.Fatalf("skipped events changed")
		}
		r := replayJSON(t, fmt.Sprint(done[0]), "--include-done", "--db", dbURL)
		if !slices.Equal(r.Replayed, done) || len(r.Skipped) != 0 || eventStatus(t, st, done[0]) != hookbox.StatusPending {
			t.Errorf("--include-done: %+v", r)
		}

		// Bulk by filter, dry run first.
		r = replayJSON(t, "--status", "dead", "--source", "polar", "--since", "24h", "--dry-run", "--db", dbURL)
		if !r.DryRun || !slices.Equal(r.Replayed, dead) {
			t.Fatalf("dry bulk: %+v", r)
		}
		for _, id := range dead {
			if eventStatus(t, st, id) != hookbox.StatusDead {
				t.Fatalf("--dry-run changed event %d", id)
			}
		}
		out = mustCLI(t, "replay", "--status", "dead", "--source", "polar", "--since", "24h", "--db", dbURL)
		if !strings.Contains(out, fmt.Sprintf("replayed 2 events: %d, %d", dead[0], dead[1])) {
			t.Errorf("bulk output %q", out)
		}
		for _, id := range dead {
			if eventStatus(t, st, id) != hookbox.StatusPending {
				t.Errorf("event %d not replayed", id)
			}
		}
		if eventStatus(t, st, otherDead[0]) != hookbox.StatusDead {
			t.Errorf("another source's dead event was replayed")
		}
		if r := replayJSON(t, "--status", "dead", "--source", "polar", "--db", dbURL); len(r.Replayed) != 0 {
			t.Errorf("second bulk replay = %+v", r)
		}

		for _, args := range [][]string{
			{"replay"},
			{"replay", "1", "--status", "dead"},
			{"replay", "abc"},
			{"replay", "--status", "nope"},
			{"replay", "--since", "soon"},
		} {
			if _, _, err := runCLI(t, append(args, "--db", dbURL)...); err == nil {
				t.Errorf("%v accepted", args)
			}
		}
	})
}

// TestReplayClearedPayload: `hookbox replay ID` of an event whose payload
// was cleared by payload retention says so and exits non-zero, and a bulk
// replay leaves such events out and says how many.
func TestReplayClearedPayload(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cleared := cliSeed(t, st, "polar", "t", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "c1")
		if _, err := st.ClearPayloads(context.Background(), time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		dead := cliSeed(t, st, "polar", "t", hookbox.StatusDead, time.Now(), "d1")
		for _, extra := range [][]string{{"--include-done"}, nil, {"--include-done", "--dry-run"}} {
			args := append([]string{"replay", fmt.Sprint(cleared[0]), "--db", dbURL}, extra...)
			out, _, err := runCLI(t, args...)
			if err == nil || !strings.Contains(out+err.Error(), "payload was cleared") {
				t.Errorf("%v: err %v, output %q; want a non-zero exit saying the payload was cleared", args, err, out)
			}
		}
		out := mustCLI(t, "replay", "--source", "polar", "--include-done", "--db", dbURL)
		if !strings.Contains(out, fmt.Sprintf("replayed 1 event: %d", dead[0])) ||
			!strings.Contains(out, "1 event") || !strings.Contains(out, "payload was cleared") {
			t.Errorf("bulk replay output:\n%s", out)
		}
		if eventStatus(t, st, cleared[0]) != hookbox.StatusDone || eventStatus(t, st, dead[0]) != hookbox.StatusPending {
			t.Errorf("statuses after replay: cleared %s, dead %s", eventStatus(t, st, cleared[0]), eventStatus(t, st, dead[0]))
		}
		out = mustCLI(t, "events", "show", fmt.Sprint(cleared[0]), "--db", dbURL)
		if !strings.Contains(out, "cleared by payload retention") {
			t.Errorf("show of a cleared event:\n%s", out)
		}
	})
}
