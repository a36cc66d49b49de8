package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestReplayJSONShape: replay --json left "skipped" out when it was empty
// (every bulk replay), and gave bare ids when it was not, the reasons
// only in the text output. "skipped" is always there, and
// "skipped_reasons" maps each skipped id to its reason; the other keys
// are as they were.
func TestReplayJSONShape(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		done := cliSeed(t, st, "gh", "push", hookbox.StatusDone, time.Now(), "d1")
		raw := func(wantCode int, args ...string) map[string]json.RawMessage {
			t.Helper()
			code, out, errOut := runExit(t, append([]string{"replay", "--db", dbURL, "--json"}, args...)...)
			var m map[string]json.RawMessage
			if code != wantCode || json.Unmarshal([]byte(out), &m) != nil {
				t.Fatalf("replay %v: exit %d, %q %s", args, code, out, errOut)
			}
			return m
		}
		m := raw(0, "--source", "nosuch", "--dry-run")
		if string(m["skipped"]) != "[]" || string(m["skipped_reasons"]) != "{}" || string(m["replayed"]) != "[]" || string(m["dry_run"]) != "true" {
			t.Errorf("bulk replay: %s", m)
		}
		m = raw(1, fmt.Sprint(done[0]), "99999", "--dry-run")
		var (
			reasons map[string]string
			skipped []int64
		)
		if err := errors.Join(json.Unmarshal(m["skipped_reasons"], &reasons), json.Unmarshal(m["skipped"], &skipped)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(skipped, []int64{done[0], 99999}) || len(reasons) != 2 ||
			!strings.Contains(reasons[fmt.Sprint(done[0])], "pass --include-done") || reasons["99999"] != "no such event" {
			t.Errorf("replay by id: %s", m)
		}
		m = raw(0, fmt.Sprint(done[0]), "--include-done")
		var replayed []int64
		if err := json.Unmarshal(m["replayed"], &replayed); err != nil || !slices.Equal(replayed, done) ||
			string(m["skipped"]) != "[]" || string(m["skipped_reasons"]) != "{}" {
			t.Errorf("replay with --include-done: %s", m)
		}
	})
}
