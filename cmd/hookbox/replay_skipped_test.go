package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestReplaySkippedOutput pins what replay says of the events it leaves
// alone, each cause at once (done, being worked, payload cleared, no such
// event), in text and in JSON, and of one changed since the operator
// looked (--if-attempts): the lines, the reasons and the exit errors.
// The command reads each skipped event once for all of them.
func TestReplaySkippedOutput(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		cleared := cliSeed(t, st, "polar", "t", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "c1")[0]
		if _, err := st.ClearPayloads(context.Background(), time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		done := cliSeed(t, st, "polar", "t", hookbox.StatusDone, time.Now(), "ok1")[0]
		dead := cliSeed(t, st, "polar", "t", hookbox.StatusDead, time.Now(), "d1")[0]
		inFlight := cliSeed(t, st, "stripe", "charge", hookbox.StatusProcessing, time.Now(), "s1")[0]
		const missing = 424242
		ids := []string{fmt.Sprint(done), fmt.Sprint(inFlight), fmt.Sprint(cleared), fmt.Sprint(missing), fmt.Sprint(dead)}
		subst := strings.NewReplacer("DONE", fmt.Sprint(done), "INFLIGHT", fmt.Sprint(inFlight),
			"CLEARED", fmt.Sprint(cleared), "DEAD", fmt.Sprint(dead))

		const (
			text = `would replay 1 event: DEAD
skipped DONE: it is done; pass --include-done to run it again
skipped INFLIGHT: it is being worked right now
skipped CLEARED: its payload was cleared by payload retention; a replay would send an empty body
skipped 424242: no such event
dry run: nothing was changed
`
			jsonText = `{
  "replayed": [
    DEAD
  ],
  "skipped": [
    DONE,
    INFLIGHT,
    CLEARED,
    424242
  ],
  "skipped_reasons": {
    "CLEARED": "its payload was cleared by payload retention; a replay would send an empty body",
    "DONE": "it is done; pass --include-done to run it again",
    "INFLIGHT": "it is being worked right now",
    "424242": "no such event"
  },
  "dry_run": true
}
`
			fails       = "no such event: 424242\nnot replayed: CLEARED: the payload was cleared by payload retention"
			changedWhy  = "it changed since you looked (1 attempts now, 5 when you looked: it was replayed or worked meanwhile); look again before replaying"
			changed     = "nothing to replay\nskipped DEAD: " + changedWhy + "\n"
			changedJSON = `{
  "replayed": [],
  "skipped": [
    DEAD
  ],
  "skipped_reasons": {
    "DEAD": "` + changedWhy + `"
  },
  "dry_run": true
}
`
			changedFails = "not replayed: DEAD: changed since you looked (--if-attempts)"
		)
		for _, c := range []struct {
			args     []string
			out, err string
		}{
			{append(ids, "--dry-run"), text, fails},
			{append(ids, "--dry-run", "--json"), jsonText, fails},
			{[]string{fmt.Sprint(dead), "--if-attempts", "5", "--dry-run"}, changed, changedFails},
			{[]string{fmt.Sprint(dead), "--if-attempts", "5", "--dry-run", "--json"}, changedJSON, changedFails},
		} {
			out, _, err := runCLI(t, append([]string{"replay", "--db", dbURL}, c.args...)...)
			want := subst.Replace(c.out)
			if slices.Contains(c.args, "--json") {
				// The keys of skipped_reasons are sorted as text, the
				// ids above in the order named: compare values.
				var got, wanted any
				if err := errors.Join(json.Unmarshal([]byte(out), &got), json.Unmarshal([]byte(want), &wanted)); err != nil {
					t.Fatalf("replay %v printed %q: %v", c.args, out, err)
				}
				if !reflect.DeepEqual(got, wanted) {
					t.Errorf("replay %v printed\n%s\nwant\n%s", c.args, out, want)
				}
			} else if out != want {
				t.Errorf("replay %v printed\n%s\nwant\n%s", c.args, out, want)
			}
			if want := subst.Replace(c.err); err == nil || err.Error() != want {
				t.Errorf("replay %v: error %v, want %q", c.args, err, want)
			}
		}
	})
}
