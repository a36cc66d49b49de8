package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

func TestPurgeCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		day := 24 * time.Hour
		old := time.Now().Add(-40 * day)
		oldDone := cliSeed(t, st, "a", "t", hookbox.StatusDone, old, "1", "2", "3")
		oldDead := cliSeed(t, st, "b", "t", hookbox.StatusDead, old, "4")
		newDone := cliSeed(t, st, "c", "t", hookbox.StatusDone, time.Now().Add(-2*day), "5")
		processing := cliSeed(t, st, "d", "t", hookbox.StatusProcessing, old, "6")
		pending := cliSeed(t, st, "e", "t", hookbox.StatusPending, old, "7")
		exists := func(id int64) bool {
			_, err := st.Event(context.Background(), id)
			return err == nil
		}
		all := slices.Concat(oldDone, oldDead, newDone, processing, pending)

		// --dry-run counts and deletes nothing.
		out := mustCLI(t, "purge", "--days", "30", "--dry-run", "--db", dbURL)
		for _, want := range []string{"would delete 3 done events", "kept 1 dead", "never purged", "processed again", "nothing was deleted"} {
			if !strings.Contains(out, want) {
				t.Errorf("dry-run output lacks %q:\n%s", want, out)
			}
		}
		out = mustCLI(t, "purge", "--days", "1", "--dry-run", "--include-dead", "--json", "--db", dbURL)
		var r server.PurgeReply
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("--json %q: %v", out, err)
		}
		if r.Done != 4 || r.Dead != 1 || !r.DryRun || !r.IncludeDead || !strings.Contains(r.Note, "processed again") {
			t.Errorf("dry --json = %+v", r)
		}
		for _, id := range all {
			if !exists(id) {
				t.Fatalf("--dry-run deleted event %d", id)
			}
		}

		// A real purge deletes only old done events.
		out = mustCLI(t, "purge", "--days", "30", "--db", dbURL)
		if !strings.Contains(out, "deleted 3 done events") || !strings.Contains(out, "a redelivery of a purged id would be stored and processed again") {
			t.Errorf("purge output:\n%s", out)
		}
		for _, id := range oldDone {
			if exists(id) {
				t.Errorf("old done event %d survived", id)
			}
		}
		for _, id := range slices.Concat(oldDead, newDone, processing, pending) {
			if !exists(id) {
				t.Errorf("event %d was purged", id)
			}
		}
		// --include-dead takes old dead events too, still nothing unfinished.
		out = mustCLI(t, "purge", "--days", "30", "--include-dead", "--json", "--db", dbURL)
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Done != 0 || r.Dead != 1 || r.DryRun {
			t.Errorf("--include-dead = %+v, %v", r, err)
		}
		for _, id := range slices.Concat(newDone, processing, pending) {
			if !exists(id) {
				t.Errorf("event %d was purged", id)
			}
		}
		if exists(oldDead[0]) {
			t.Errorf("old dead event survived --include-dead")
		}
		// --days 0 takes every finished event, never the unfinished ones.
		mustCLI(t, "purge", "--days", "0", "--include-dead", "--db", dbURL)
		for _, id := range slices.Concat(processing, pending) {
			if !exists(id) {
				t.Errorf("unfinished event %d was purged", id)
			}
		}

		for _, args := range [][]string{{"purge"}, {"purge", "--days", "-1"}, {"purge", "--days", "x"}} {
			if _, _, err := runCLI(t, append(args, "--db", dbURL)...); err == nil {
				t.Errorf("%v accepted", args)
			}
		}
	})
}

// TestPurgeRefusesHugeDays: --days past the cap (meant as "forever") is a
// usage error, not a cut-off that wrapped into the future and purges every
// finished event.
func TestPurgeRefusesHugeDays(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		done := cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now().Add(-2*24*time.Hour), "1")
		dead := cliSeed(t, st, "b", "t", hookbox.StatusDead, time.Now().Add(-2*24*time.Hour), "2")
		for _, days := range []string{"36501", "106752", "200000"} {
			for _, extra := range [][]string{nil, {"--dry-run"}, {"--include-dead"}} {
				args := append([]string{"purge", "--days", days, "--db", dbURL}, extra...)
				_, _, err := runCLI(t, args...)
				if err == nil || !strings.Contains(err.Error(), "--days") || !strings.Contains(err.Error(), "36500") {
					t.Errorf("%v: err = %v, want a usage error naming --days and the cap", args, err)
				}
			}
		}
		for _, id := range slices.Concat(done, dead) {
			if _, err := st.Event(context.Background(), id); err != nil {
				t.Errorf("event %d was purged: %v", id, err)
			}
		}
	})
}

// TestPurgeNamesStoredEvents: a purge deletes the old events of a
// store_only source (stored, finished on arrival) along with done ones, and
// says so under their own name. It used to count them as done: one done
// event and one stored event read "deleted 2 done events".
func TestPurgeNamesStoredEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		old := time.Now().Add(-40 * 24 * time.Hour)
		done := cliSeed(t, st, "a", "t", hookbox.StatusDone, old, "1")
		d := storetest.Delivery("archive", "2")
		d.FanOut, d.ReceivedAt = true, old // as a store_only source's delivery is stored
		rs, err := st.Ingest(context.Background(), []hookbox.Delivery{d})
		if err != nil {
			t.Fatal(err)
		}
		if e, err := st.Event(context.Background(), rs[0].ID); err != nil || e.Status != hookbox.StatusStored {
			t.Fatalf("seeded event: %+v, %v; want it stored", e, err)
		}
		cliSeed(t, st, "a", "t", hookbox.StatusPending, time.Now(), "newer") // SQLite keeps the newest event

		out := mustCLI(t, "purge", "--days", "30", "--dry-run", "--include-dead", "--json", "--db", dbURL)
		var r server.PurgeReply
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("--json %q: %v", out, err)
		}
		if r.Done != 1 || r.Stored != 1 || r.Dead != 0 {
			t.Errorf("dry --json = %+v, want done 1, stored 1, dead 0", r)
		}
		out = mustCLI(t, "purge", "--days", "30", "--db", dbURL)
		if !strings.Contains(out, "deleted 1 done events and 1 stored events last changed before") {
			t.Errorf("purge output:\n%s\nwant the done and the stored event counted apart", out)
		}
		for _, id := range []int64{done[0], rs[0].ID} {
			if _, err := st.Event(context.Background(), id); err == nil {
				t.Errorf("event %d survived the purge", id)
			}
		}
	})
}
