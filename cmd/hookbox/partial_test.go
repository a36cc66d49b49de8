package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// cancellingTerminal is a fake terminal that cancels the command's context
// when the progress line first shows a count (trigger, " deleted" or
// " replayed"). The stores report progress synchronously once a batch has
// committed, so the command is cancelled, as Ctrl-C would, after its first
// batch and before its second.
type cancellingTerminal struct {
	fakeTerminal
	trigger string
	cancel  context.CancelFunc
}

func (c *cancellingTerminal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.trigger) {
		c.cancel()
	}
	return c.fakeTerminal.Write(p)
}

// runCLICancelled runs the command with stdout and stderr on one fake
// terminal, as on an operator's screen, cancelling it when the progress
// line first shows trigger; it returns what the screen received.
func runCLICancelled(t *testing.T, trigger string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := &cancellingTerminal{trigger: trigger, cancel: cancel}
	root := newRootCmd()
	root.SetOut(term)
	root.SetErr(term)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return term.String(), err
}

// TestPartialPurgeAndReplayReported: a purge and a bulk replay cancelled
// after their first batch (the stores commit batch by batch) fail, and
// still say how many events the committed batches deleted or replayed, in
// the words of a successful run, on a line the progress display does not
// clear afterwards.
func TestPartialPurgeAndReplayReported(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		const n = 1200 // more than one batch on both stores (250 and 1000)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now().Add(-40*24*time.Hour), ids...)
		cliSeed(t, st, "b", "t", hookbox.StatusDead, time.Now(), ids...)
		count := func(s hookbox.Status) int {
			t.Helper()
			stats, err := st.Stats(context.Background(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return stats.ByStatus[s]
		}
		// reported checks the screen after a cancelled run: the report
		// follows the progress line's last redraw or clearing.
		reported := func(cmd, screen string, err error, want string) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "context canceled") {
				t.Errorf("%s: err = %v, want the cancellation (a non-zero exit)", cmd, err)
			}
			shown := screen[strings.LastIndex(screen, "\r")+1:]
			if !strings.Contains(shown, want) || !strings.Contains(shown, partialNote) {
				t.Errorf("%s: the screen, after the progress line, lacks %q and the part-way note:\n%q", cmd, want, screen)
			}
		}

		screen, err := runCLICancelled(t, " deleted", "purge", "--days", "30", "--db", dbURL)
		deleted := n - count(hookbox.StatusDone)
		if deleted <= 0 || deleted >= n {
			t.Fatalf("purge deleted %d of %d events: want it cancelled after its first batch", deleted, n)
		}
		reported("purge", screen, err, fmt.Sprintf("deleted %d done events last changed before", deleted))

		screen, err = runCLICancelled(t, " replayed", "replay", "--source", "b", "--status", "dead", "--db", dbURL)
		replayed := count(hookbox.StatusPending)
		if replayed <= 0 || replayed >= n {
			t.Fatalf("replay replayed %d of %d events: want it cancelled after its first batch", replayed, n)
		}
		reported("replay", screen, err, fmt.Sprintf("replayed %d events: ", replayed))
	})
}

// TestReplayStoppedSaysHowToGoOn: a bulk replay stopped after its first
// batch (cancelled, as Ctrl-C would) says where it stopped and how to go
// on, in text (after the part-way note) and with --json, where the reply
// used to read as a finished replay's: "stopped", "replayed_count" (the
// events now pending), "resume_after_id" and "rerun". Both exit non-zero.
// --after-id with that id replays the rest, none twice.
func TestReplayStoppedSaysHowToGoOn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		names := make([]string, 1500)
		for i := range names {
			names[i] = fmt.Sprint("s", i)
		}
		text := cliSeed(t, st, "text", "t", hookbox.StatusDead, time.Now(), names...)
		asJSON := cliSeed(t, st, "json", "t", hookbox.StatusDead, time.Now(), names...)
		pending := func(source string) []int64 {
			t.Helper()
			evs, err := st.Events(context.Background(), hookbox.Filter{Source: source, Status: hookbox.StatusPending, Limit: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, e := range evs {
				ids = append(ids, e.ID)
			}
			slices.Sort(ids)
			return ids
		}
		slices.Sort(text)
		slices.Sort(asJSON)

		screen, err := runCLICancelled(t, " replayed", "replay", "--source", "text", "--db", dbURL)
		shown := screen[strings.LastIndex(screen, "\r")+1:]
		done := pending("text")
		goOn := fmt.Sprintf("--after-id %d --pace-after %d", done[len(done)-1], len(done))
		if err == nil || len(done) == 0 || len(done) == len(text) || !strings.Contains(shown, fmt.Sprintf("replayed %d events: ", len(done))) ||
			!strings.Contains(shown, partialNote) || !strings.Contains(shown, "Run the same replay with "+goOn) {
			t.Errorf("text: err %v, %d of %d pending; the screen lacks the count, the part-way note or %q:\n%s", err, len(done), len(text), goOn, shown)
		}
		if out := mustCLI(t, append([]string{"replay", "--source", "text", "--db", dbURL, "--json"}, strings.Fields(goOn)...)...); !strings.Contains(out, fmt.Sprint(text[len(done)])) ||
			!slices.Equal(pending("text"), text) {
			t.Errorf("going on with %s left %d of %d pending: %s", goOn, len(pending("text")), len(text), out)
		}
		// Paced as one replay: none of the rest is due before one the
		// stopped replay paced.
		var last time.Time
		for _, id := range text {
			e, err := st.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e.NextAttemptAt.Before(last) {
				t.Fatalf("going on with %s: event %d is due at %v, before the one before it (%v)", goOn, id, e.NextAttemptAt, last)
			}
			last = e.NextAttemptAt
		}

		screen, err = runCLICancelled(t, " replayed", "replay", "--source", "json", "--db", dbURL, "--json")
		var rep struct {
			Replayed        []int64 `json:"replayed"`
			Stopped         bool    `json:"stopped"`
			ReplayedCount   int     `json:"replayed_count"`
			ResumeAfterID   *int64  `json:"resume_after_id"`
			ResumePaceAfter int     `json:"resume_pace_after"`
			Rerun           string  `json:"rerun"`
			Error           string  `json:"error"`
		}
		if jerr := json.Unmarshal([]byte(screen[strings.LastIndex(screen, "\r")+1:]), &rep); jerr != nil || err == nil {
			t.Fatalf("--json: err %v, output %v:\n%s", err, jerr, screen)
		}
		done = pending("json")
		if !rep.Stopped || rep.ReplayedCount != len(done) || !slices.Equal(rep.Replayed, done) || len(done) == len(asJSON) ||
			rep.ResumeAfterID == nil || *rep.ResumeAfterID != done[len(done)-1] || rep.ResumePaceAfter != len(done) ||
			!strings.Contains(rep.Rerun, fmt.Sprintf("--after-id %d --pace-after %d", done[len(done)-1], len(done))) || !strings.Contains(rep.Error, "the rest were not replayed") {
			t.Errorf("--json: %+v; want stopped, the %d events pending counted and listed, where to go on", rep, len(done))
		}
	})
}
