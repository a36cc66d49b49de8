package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
)

// fakeTerminal is a buffer that says it is a terminal.
type fakeTerminal struct{ syncbuf.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// runCLIOnTerminal runs the command with stderr on a fake terminal.
func runCLIOnTerminal(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	term := &fakeTerminal{}
	root.SetOut(&out)
	root.SetErr(term)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("hookbox %s: %v\n%s", strings.Join(args, " "), err, term.String())
	}
	return out.String(), term.String()
}

// TestProgressOnTerminal: a purge and a replay of more than one batch
// show their running count on a terminal, one line redrawn in place and
// cleared at the end; the command's own output is unchanged, and nothing
// is drawn when stderr is not a terminal.
func TestProgressOnTerminal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		ids := make([]string, 2500)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now().Add(-40*24*time.Hour), ids...)
		cliSeed(t, st, "b", "t", hookbox.StatusDead, time.Now(), ids...)

		out, term := runCLIOnTerminal(t, "purge", "--days", "30", "--db", dbURL)
		if !strings.Contains(out, "deleted 2500 done events") || strings.Contains(out, "purging") {
			t.Errorf("purge output:\n%s", out)
		}
		for _, want := range []string{"\rpurging: 1000 deleted, ", "\rpurging: 2000 deleted, ", "\rpurging: 2500 deleted, "} {
			if !strings.Contains(term, want) {
				t.Errorf("terminal lacks %q: %q", want, term)
			}
		}
		if !strings.HasSuffix(term, "\r") || strings.Contains(term, "\n") {
			t.Errorf("progress line not cleared at the end: %q", term)
		}

		out, term = runCLIOnTerminal(t, "replay", "--source", "b", "--status", "dead", "--db", dbURL)
		if !strings.Contains(out, "replayed 2500") {
			t.Errorf("replay output:\n%s", out)
		}
		if !strings.Contains(term, "replaying: 2500 replayed, ") {
			t.Errorf("terminal lacks the replay count: %q", term)
		}

		_, errOut, err := runCLI(t, "purge", "--days", "1", "--include-dead", "--db", dbURL)
		if err != nil || errOut != "" {
			t.Errorf("purge with stderr not a terminal: err %v, stderr %q", err, errOut)
		}
	})
}
