package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// seedTarget stores one event of source s fanned out to target, whose
// delivery (queue s/target) then waits.
func seedTarget(t *testing.T, st dbtest.Store, source, target, id string) {
	t.Helper()
	d := storetest.Delivery(source, id)
	d.FanOut, d.Routes = true, []hookbox.Route{{Target: target}}
	if _, err := st.Ingest(context.Background(), []hookbox.Delivery{d}); err != nil {
		t.Fatal(err)
	}
}

// TestRetireWithoutConfigNeedsYes: without --config, targets retire ended
// the deliveries of a target a running process still works (a paused one
// has no lease, so none counted as in flight) with no check and no
// question. It now says what it would end and exits 2 unless --yes; a
// name with no unfinished delivery is refused, and one the database never
// held is called a likely typo.
func TestRetireWithoutConfigNeedsYes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		seedTarget(t, st, "shop", "billing", "1")
		if code, _, errOut := runExit(t, "--db", dbURL, "targets", "pause", "shop/billing", "--reason", "incident"); code != 0 || errOut != "" {
			t.Fatalf("pause: exit %d %s", code, errOut)
		}
		pending := func() int {
			t.Helper()
			b, err := st.TargetBacklog(context.Background(), "shop/billing", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return b.Pending
		}

		code, out, errOut := runExit(t, "--db", dbURL, "targets", "retire", "shop/billing")
		if code != 2 || !strings.Contains(out, "would end 1 delivery of shop/billing as dead") ||
			!strings.Contains(errOut, "without --config") || !strings.Contains(errOut, "--yes") || pending() != 1 {
			t.Fatalf("retire without --config or --yes: exit %d, pending %d\n%s%s", code, pending(), out, errOut)
		}
		code, out, _ = runExit(t, "--db", dbURL, "targets", "retire", "shop/billing", "--json")
		var reply server.RetireReply
		if code != 2 || json.Unmarshal([]byte(out), &reply) != nil || !reply.DryRun || reply.Ended != 1 || pending() != 1 {
			t.Fatalf("retire --json without --yes: exit %d %q", code, out)
		}
		if code, out, errOut := runExit(t, "--db", dbURL, "targets", "retire", "shop/billing", "--dry-run"); code != 0 ||
			!strings.Contains(out, "would end 1 delivery") || pending() != 1 {
			t.Fatalf("retire --dry-run: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := runExit(t, "--db", dbURL, "targets", "retire", "shop/billing", "--yes"); code != 0 ||
			!strings.Contains(out, "ended 1 delivery of shop/billing as dead") || pending() != 0 {
			t.Fatalf("retire --yes: exit %d\n%s%s", code, out, errOut)
		}
		for _, args := range [][]string{{"--yes"}, {}, {"--dry-run"}} {
			code, out, errOut := runExit(t, append([]string{"--db", dbURL, "targets", "retire", "shop/billing"}, args...)...)
			if code != 1 || !strings.Contains(errOut, "nothing to retire: no unfinished deliveries of shop/billing") {
				t.Errorf("retire %v of a name with nothing left: exit %d\n%s%s", args, code, out, errOut)
			}
		}
		code, _, errOut = runExit(t, "--db", dbURL, "targets", "retire", "shop/biling", "--yes")
		if code != 1 || !strings.Contains(errOut, "holds no delivery of shop/biling; a typo?") {
			t.Errorf("retire of a name never seen: exit %d %s", code, errOut)
		}
	})
}

// TestPauseResumeSayWhatTheyDid: targets pause of a name nothing has (a
// typo) printed "paused" and exited 0 as if it had paused the target
// meant; a pause of a paused target dropped a new --reason without a
// word; a resume of a target not paused failed. Now: a warning names the
// unknown name, a second pause says the target was already paused and
// that its reason was kept, and resume is idempotent (exit 0, saying so).
func TestPauseResumeSayWhatTheyDid(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		seedTarget(t, st, "shop", "billing", "1")
		cli := func(args ...string) (int, string, string) {
			t.Helper()
			return runExit(t, append([]string{"--db", dbURL, "targets"}, args...)...)
		}

		code, out, errOut := cli("pause", "shop/biling")
		if code != 0 || !strings.Contains(out, "paused shop/biling") ||
			!strings.Contains(errOut, "warning: nothing has the name shop/biling") || !strings.Contains(errOut, "a typo?") {
			t.Errorf("pause of an unknown name: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := cli("pause", "shop/billing", "--reason", "deploy"); code != 0 || !strings.Contains(out, "paused shop/billing") || errOut != "" {
			t.Errorf("pause: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = cli("pause", "shop/billing", "--reason", "another")
		if code != 0 || !strings.Contains(out, "shop/billing was already paused") || !strings.Contains(out, "(deploy)") ||
			!strings.Contains(out, "the reason was not changed") || errOut != "" {
			t.Errorf("second pause with a new reason: exit %d\n%s%s", code, out, errOut)
		}
		paused, err := st.Paused(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paused {
			if p.Name == "shop/billing" && p.Reason != "deploy" {
				t.Errorf("the reason became %q", p.Reason)
			}
		}
		if code, out, _ := cli("pause", "shop/billing"); code != 0 || !strings.Contains(out, "already paused") || strings.Contains(out, "reason was not changed") {
			t.Errorf("second pause without a reason: exit %d\n%s", code, out)
		}
		if code, out, _ := cli("resume", "shop/billing"); code != 0 || !strings.Contains(out, "resumed shop/billing") {
			t.Errorf("resume: exit %d\n%s", code, out)
		}
		if code, out, errOut := cli("resume", "shop/billing"); code != 0 || !strings.Contains(out, "shop/billing was not paused") || errOut != "" {
			t.Errorf("second resume: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := cli("resume", "nosuch"); code != 0 || !strings.Contains(out, "nosuch was not paused") ||
			!strings.Contains(errOut, "warning: nothing has the name nosuch") {
			t.Errorf("resume of an unknown name: exit %d\n%s%s", code, out, errOut)
		}
		// A name that only the source's own events have is known too.
		if _, err := st.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("plain", "2")}); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := cli("pause", "plain"); code != 0 || errOut != "" {
			t.Errorf("pause of a source with events: exit %d %s", code, errOut)
		}
		// A source with targets: a pause of its name holds none of its
		// targets' deliveries (it printed "paused gh" and nothing else).
		seedTarget(t, st, "gh", "ci", "3")
		if code, _, errOut := cli("pause", "gh"); code != 0 || !strings.Contains(errOut, "warning: the deliveries of gh's targets (gh/ci)") {
			t.Errorf("pause of a source with targets: exit %d %s, want a warning naming gh/ci", code, errOut)
		}
	})
}
