package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestSkipAfterAWaitedSkip: two skips of one dead delivery that both wait
// for its row's lock (held here by another transaction) end it once: the
// second, which locks the row once the first has committed, finds the
// first's skip row and reports the delivery already skipped. Read by the
// statement that waited for the lock, whose snapshot is older than the
// first skip's commit, the row is not there, and the delivery is skipped
// twice.
func TestSkipAfterAWaitedSkip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t))
	id := storetest.SeedHeldKey(t, s, "ws", "t", "K", "forward: 410 Gone", "1")[0]
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	held, release, holdErr := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holdErr <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT id FROM queue WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-holdErr:
		t.Fatalf("hold the row: %v", err)
	}
	type result struct {
		res hookbox.SkipResult
		err error
	}
	results := make(chan result, 2)
	for i := range 2 {
		go func() {
			res, err := s.Skip(ctx, hookbox.SkipParams{ID: id, Reason: fmt.Sprint("skip ", i),
				Key: func(d string) string { return "(own):" + d }})
			results <- result{res, err}
		}()
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(query, 'SELECT q.status')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d skips wait for the row's lock after 20 s, want 2", waiting)
		}
	}
	close(release)
	if err := <-holdErr; err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.res.Already {
			skipped++
		}
	}
	as, err := s.Attempts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, a := range as {
		if a.Outcome == hookbox.AttemptSkip {
			rows++
		}
	}
	if skipped != 1 || rows != 1 {
		t.Fatalf("two skips that waited for the row: %d skipped it, %d skip rows; want 1 and 1", skipped, rows)
	}
}
