package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestRejectedBoundHoldsUnderConcurrentWriters: hookbox.RejectionStore
// promises that no commit of AddRejections leaves more than the bound's
// rows. Two writers on PostgreSQL (two serve processes on one database,
// or the recorder and the hourly Trim) each counted the log as they saw
// it, their own rows and the committed ones, deleted the same oldest
// rows, and left the log above MaxCount (15 rows for a bound of 10). The
// trims now take turns.
func TestRejectedBoundHoldsUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	const maxCount = 10
	b := hookbox.RejectionBounds{MaxCount: maxCount}
	rows := func(n int) []hookbox.Rejection {
		var rs []hookbox.Rejection
		for range n {
			rs = append(rs, hookbox.Rejection{Source: "a", ReceivedAt: time.Now(), RemoteAddr: "192.0.2.1", Status: 401, Reason: "bad signature"})
		}
		return rs
	}
	if _, err := s.AddRejections(ctx, rows(maxCount), b); err != nil {
		t.Fatal(err)
	}
	// Another session holds the oldest row for a moment (as a concurrent
	// trim or a re-check's mark would), so that both writers below are
	// inside their transactions at once.
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	ltx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ltx.Exec(ctx, `SELECT id FROM rejected_deliveries ORDER BY id LIMIT 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.AddRejections(ctx, rows(5), b)
		}()
	}
	// Await both writers waiting on the lock (watched from a session of
	// its own: one in a transaction sees pg_stat_activity as it was when
	// the transaction first read it).
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
              AND (query LIKE '%rejected_deliveries%' OR query LIKE '%hookbox-rejected-trim%')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writers waiting, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ltx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := locker.QueryRow(ctx, `SELECT count(*) FROM rejected_deliveries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > maxCount {
		t.Errorf("the log holds %d rows after both writers committed, bound %d", n, maxCount)
	}
}
