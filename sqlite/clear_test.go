package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// TestClearPayloadsJudgesAgainUnderTheLock: ClearPayloads picks its
// candidates on a reader and clears them once the writer is its own; an
// event that a replay ran again meanwhile, done now after the cutoff,
// keeps its payload (it was cleared on the strength of the old reading,
// and the event could not be replayed again).
func TestClearPayloadsJudgesAgainUnderTheLock(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "rerun")})
	if err != nil {
		t.Fatal(err)
	}
	id := rs[0].ID
	exec := func(ctx context.Context, tx *hookbox.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	if err := s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return exec(ctx, tx, `UPDATE events SET status = 'done', updated_at = ? WHERE id = ?`, millis(time.Now().Add(-48*time.Hour)), id)
	}); err != nil {
		t.Fatal(err)
	}

	// Hold the writer while ClearPayloads reads; in the same transaction,
	// do what a replay and the run it started would have done meanwhile.
	var waits int64
	held, release, holdDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holdDone <- s.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			waits = s.writer.Stats().WaitCount
			close(held)
			<-release
			return exec(ctx, tx, `UPDATE events SET updated_at = ? WHERE id = ?`, millis(time.Now()), id)
		})
	}()
	<-held
	type result struct {
		n   int
		err error
	}
	cleared := make(chan result, 1)
	go func() {
		n, err := s.ClearPayloads(ctx, time.Now().Add(-24*time.Hour))
		cleared <- result{n, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); s.writer.Stats().WaitCount == waits; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("ClearPayloads never waited for the writer")
		}
	}
	close(release)
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}
	r := <-cleared
	if r.err != nil || r.n != 0 {
		t.Errorf("ClearPayloads = %d, %v; want 0 cleared", r.n, r.err)
	}
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Payload) == 0 {
		t.Error("the payload of an event done after the cutoff was cleared")
	}
}

// TestPurgeCheckpointDoesNotWaitForReaders: the checkpoint after a purge
// waits for readers only briefly (truncateWAL), not the writer's busy
// timeout (30 s here): it holds the writer meanwhile, and a reader on an
// older snapshot kept ingest waiting behind it for the whole timeout.
func TestPurgeCheckpointDoesNotWaitForReaders(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{BusyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", storetest.Delivery("s", "old"))
	// A reader holds a snapshot from before the purge.
	rtx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	purged := make(chan error, 1)
	go func() {
		_, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour)})
		purged <- err
	}()
	select {
	case err := <-purged:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the purge still waits for the reader after 10 s (its checkpoint waits out the busy timeout)")
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "after")}); err != nil {
		t.Fatal(err)
	}
}

// TestClearPayloadsFinishesAnOlderClearing: an event whose payload an
// older hookbox cleared kept its headers and last error; the next
// run clears those too, and the run after it finds nothing.
func TestClearPayloadsFinishesAnOlderClearing(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	d := storetest.Delivery("s", "1")
	d.Header.Set("X-Shop-Domain", "shop.example")
	id := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", d)[0]
	// What ClearPayloads did before it dropped more than the payload.
	if _, err := s.writer.ExecContext(ctx, `UPDATE events SET payload = NULL, last_error = 'the app answered 422' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	for run, want := range []int{1, 0} {
		if n, err := s.ClearPayloads(ctx, time.Now().Add(-time.Hour)); err != nil || n != want {
			t.Fatalf("run %d: ClearPayloads = %d, %v; want %d", run+1, n, err, want)
		}
	}
	e, err := s.Event(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Header) != 0 || e.LastError != "" || !e.PayloadCleared {
		t.Errorf("event cleared by an older hookbox, after a run: headers %v, last error %q", e.Header, e.LastError)
	}
}
