package main

import (
	"context"
	"fmt"
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
