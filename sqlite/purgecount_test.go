package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestPurgeCountsOnlyCommittedBatches: a purge whose second batch fails
// at its commit (a deferred foreign key the test adds makes the commit
// refuse the batch's deletions, which roll back) returns, with the error,
// the count of the first batch alone: exactly the events gone. Before, a
// batch's deletions were counted as its rows came back, before the
// commit, so a batch that then rolled back was counted as deleted.
func TestPurgeCountsOnlyCommittedBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ds []hookbox.Delivery
	for i := range 6 {
		ds = append(ds, storetest.Delivery("pc", fmt.Sprint("d", i)))
	}
	ids := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", ds...)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The commit of the batch that deletes ids[3] fails: a row still
	// refers to it, checked only at the commit.
	for _, q := range []string{
		`CREATE TABLE pin (event_id INTEGER REFERENCES events (id) DEFERRABLE INITIALLY DEFERRED)`,
		fmt.Sprintf(`INSERT INTO pin VALUES (%d)`, ids[3]),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour), BatchSize: 2})
	left, lerr := s.Events(context.Background(), hookbox.Filter{Source: "pc"})
	if lerr != nil {
		t.Fatal(lerr)
	}
	gone := len(ids) - len(left)
	if err == nil || res.Total() != gone {
		t.Fatalf("purge = %+v, %v; %d of %d events gone: want an error and the count of those gone", res, err, gone, len(ids))
	}
	// With the row that refers to it gone, the same purge goes on.
	if _, err := db.Exec(`DELETE FROM pin`); err != nil {
		t.Fatal(err)
	}
	rest, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour), BatchSize: 2})
	if err != nil || rest.Total() != len(left)-1 { // the newest event is kept
		t.Fatalf("running it again = %+v, %v; want the %d left but the newest deleted", rest, err, len(left)-1)
	}
}
