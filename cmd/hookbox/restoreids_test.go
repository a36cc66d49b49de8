package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestRestoreIDsCommand: after hookbox restore-ids, new events get ids
// past the gap (or --after), on both databases; a floor already passed
// changes nothing; --json says the same.
func TestRestoreIDsCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		store := func(id string) int64 {
			t.Helper()
			rs, err := st.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("ids", id)})
			if err != nil {
				t.Fatal(err)
			}
			return rs[0].ID
		}
		last := store("1")
		out := mustCLI(t, "restore-ids", "--gap", "1000", "--db", dbURL)
		if !strings.Contains(out, "new events get ids above ") {
			t.Errorf("restore-ids: %q", out)
		}
		if id := store("2"); id <= last+1000 {
			t.Errorf("after restore-ids --gap 1000 past %d, the next id is %d", last, id)
		} else {
			last = id
		}
		out = mustCLI(t, "restore-ids", "--after", "3", "--json", "--db", dbURL)
		var f hookbox.IDFloor
		if err := json.Unmarshal([]byte(out), &f); err != nil || f.Moved || f.Known < last {
			t.Errorf("restore-ids --after 3 --json: %q, %v", out, err)
		}
		out = mustCLI(t, "restore-ids", "--after", "3", "--db", dbURL)
		if !strings.Contains(out, "nothing to do") {
			t.Errorf("restore-ids --after 3: %q", out)
		}
		out = mustCLI(t, "restore-ids", "--db", dbURL)
		if id := store("3"); id <= last+hookbox.DefaultIDGap {
			t.Errorf("after restore-ids (%q), the next id is %d, not past %d", out, id, last+hookbox.DefaultIDGap)
		}
	})
}
