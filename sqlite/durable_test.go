package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/queue"
	"github.com/hookbox/hookbox/storetest"
)

// TestWALSyncerCoalesces: many concurrent commits are made durable by
// fewer syncs than commits, and every waiter returns.
func TestWALSyncerCoalesces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(path+"-wal", []byte("frames"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWALSyncer(path, slog.Default())
	defer w.close()
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.waitDurable(w.commit()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if w.synced != w.committed || w.committed != 200 {
		t.Fatalf("synced %d of %d commits", w.synced, w.committed)
	}
}

// TestWALSyncerReportsFailure: a WAL that cannot be synced is an error for
// the waiter, never a silent success.
func TestWALSyncerReportsFailure(t *testing.T) {
	w := newWALSyncer(filepath.Join(t.TempDir(), "missing.db"), slog.Default())
	if err := w.waitDurable(w.commit()); err == nil {
		t.Fatal("sync of a missing WAL reported success")
	}
}

// TestWALSyncerFollowsReplacedFile: if the WAL file is replaced (SQLite
// deletes it when the last connection closes), the syncer reopens it.
func TestWALSyncerFollowsReplacedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	os.WriteFile(path+"-wal", []byte("a"), 0o644)
	w := newWALSyncer(path, slog.Default())
	defer w.close()
	if err := w.waitDurable(w.commit()); err != nil {
		t.Fatal(err)
	}
	first := w.f
	os.Remove(path + "-wal")
	os.WriteFile(path+"-wal", []byte("b"), 0o644)
	if err := w.waitDurable(w.commit()); err != nil {
		t.Fatal(err)
	}
	if w.f == first {
		t.Fatal("kept syncing the deleted file")
	}
}

// TestWALSyncerLatchesFailure: once an fsync of the WAL has failed, no
// commit is reported durable again: not a waiter whose commit the failed
// sync covered and that was waiting on it (it must not run a sync of its
// own, which would succeed without the pages the kernel may have dropped),
// nor a commit made afterwards; and no further sync is even tried.
func TestWALSyncerLatchesFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		if err := os.WriteFile(path+"-wal", []byte("frames"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := newWALSyncer(path, slog.Default())
		defer w.close()
		entered, release := make(chan struct{}), make(chan struct{})
		var syncs atomic.Int32
		w.syncFile = func(f *os.File) error {
			if syncs.Add(1) == 1 {
				close(entered)
				<-release
				return syscall.EIO
			}
			return datasync(f)
		}
		first, inRange := w.commit(), w.commit()
		firstErr, inRangeErr := make(chan error, 1), make(chan error, 1)
		go func() { firstErr <- w.waitDurable(first) }()
		<-entered // the sync covering both commits is in flight
		go func() { inRangeErr <- w.waitDurable(inRange) }()
		synctest.Wait() // the second waiter waits for that sync
		close(release)

		if err := <-firstErr; !errors.Is(err, syscall.EIO) {
			t.Errorf("the waiter whose sync failed got %v, want EIO", err)
		}
		if err := <-inRangeErr; err == nil {
			t.Errorf("a waiter whose commit the failed sync covered was reported durable")
		}
		if err := w.waitDurable(w.commit()); err == nil {
			t.Errorf("a commit made after a failed sync was reported durable")
		}
		if n := syncs.Load(); n != 1 {
			t.Errorf("%d syncs, want 1: none after the failure", n)
		}
	})
}

// TestIngestAfterFailedWALSync: through the store, on a real SQLite file,
// after the fsync of one ingest commit failed, the sender's retry (which
// finds the row, committed in SQLite's view) and a new delivery both get an
// error wrapping hookbox.ErrUnavailable (a 503), never a receipt (a 202),
// and Ping (/readyz) fails too; reopening the store clears it.
func TestIngestAfterFailedWALSync(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var failed atomic.Bool
	s.durable.syncFile = func(f *os.File) error {
		if failed.CompareAndSwap(false, true) {
			return syscall.EIO
		}
		return datasync(f)
	}
	a := storetest.Delivery("s", "a")
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{a}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Fatalf("ingest whose fsync failed: %+v, %v; want ErrUnavailable", rs, err)
	}
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{a}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("retry after a failed fsync: %+v, %v; want ErrUnavailable, not an acknowledgement", rs, err)
	}
	if rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "b")}); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("new delivery after a failed fsync: %+v, %v; want ErrUnavailable", rs, err)
	}
	if err := s.Ping(ctx); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("Ping after a failed fsync: %v; want ErrUnavailable", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after reopening: %v", err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "c")}); err != nil {
		t.Errorf("ingest after reopening: %v", err)
	}
}

// TestClaimedSendSurvivesPowerLoss: a Go handler records an email with
// effect.RecordSend in the transaction that marks its event done, and a
// worker claims the send, about to send the email; then the power fails.
// What is on disk must keep both the handler's commit and the claim: the
// event is done (its handler does not run again and record the send a
// second time) and the send is uncertain (attempted, not done), so its
// rerun is seen. Before claims waited for the WAL sync, neither was on
// disk: the image had the delivery alone, pending, and the email went out
// twice with nothing to show for it.
func TestClaimedSendSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	image := powerLossImage(t, s)

	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("shop", "order-1")}); err != nil {
		t.Fatal(err)
	}
	runner := &queue.Runner{Queue: s}
	res, err := runner.ClaimWork(ctx, hookbox.ClaimParams{Owner: "handler", Limit: 1, Lease: time.Minute, Sources: []string{"shop"}},
		func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
			if _, err := effect.RecordSend(ctx, tx, "email", ev.DeliveryID, []byte("your licence")); err != nil {
				t.Error(err)
			}
			now := time.Now()
			return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDone,
				StartedAt: now, FinishedAt: now}
		})
	if err != nil || len(res) != 1 || res[0].Outcome.Status != hookbox.StatusDone {
		t.Fatalf("handler: %+v, %v", res, err)
	}
	sends, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "mailer", Limit: 1, Lease: time.Minute,
		Sources: []string{effect.SendSource("email")}})
	if err != nil || len(sends) != 1 {
		t.Fatalf("claim of the send: %d events, %v", len(sends), err)
	}
	// The mailer sends the email now; the power fails.

	after, err := Open(ctx, image(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	evs, err := after.Events(ctx, hookbox.Filter{Source: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Status != hookbox.StatusDone {
		t.Errorf("after the power loss the webhook event is %+v, want done: its handler would record the send again", evs)
	}
	uncertain, err := effect.Uncertain(ctx, after, "email")
	if err != nil {
		t.Fatal(err)
	}
	if len(uncertain) != 1 || uncertain[0].DeliveryID != "order-1" || uncertain[0].Attempts != 1 {
		t.Errorf("after the power loss the uncertain sends are %+v, want order-1's, attempted once", uncertain)
	}
}

// TestClaimAfterFailedWALSync: once a sync of the WAL has failed, Claim
// hands out nothing (an error wrapping hookbox.ErrUnavailable): what it
// leased may never reach the disk.
func TestClaimAfterFailedWALSync(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "a")}); err != nil {
		t.Fatal(err)
	}
	s.durable.syncFile = func(*os.File) error { return syscall.EIO }
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{"s"}})
	if !errors.Is(err, hookbox.ErrUnavailable) || len(evs) != 0 {
		t.Fatalf("claim whose sync failed: %d events, %v; want none and ErrUnavailable", len(evs), err)
	}
}

// TestLogoutSurvivesPowerLoss: a logout (EndSession) is on disk when it
// returns: the files as they were at the last fsync, which a power loss
// leaves, do not hold the ended session.
func TestLogoutSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	image := powerLossImage(t, s)
	now := time.Now()
	if err := s.StartSession(ctx, hookbox.Session{ID: "sess-1", Expires: now.Add(time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("shop", "1")}); err != nil { // a sync
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	// Logged out (the reply went back); the power fails.
	after, err := Open(ctx, image(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if live, err := after.SessionLive(ctx, "sess-1", time.Now()); err != nil || live {
		t.Errorf("after the power loss the logged-out session is live=%v (%v)", live, err)
	}
}

// powerLossImage makes each sync of s's WAL, once done, copy the database
// file and its WAL to another directory, and returns a function that
// gives the copy's path: the files as a power loss would leave them at
// worst, everything written since the last sync lost. (SQLite's own syncs,
// at checkpoints, copy nothing: the image can be older than the disk,
// never newer.)
func powerLossImage(t *testing.T, s *Store) func() string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "image.db")
	var mu sync.Mutex
	s.durable.syncFile = func(f *os.File) error {
		if err := datasync(f); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(s.path + suffix)
			if err != nil {
				return err
			}
			if err := os.WriteFile(img+suffix, b, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stat(img); err != nil {
			t.Fatalf("no sync of the WAL ever finished: %v", err)
		}
		return img
	}
}

// TestCloseTwiceIsQuiet: a store closed twice (a program that closes it
// and then stops a service that closes it too) reports no error the
// second time. Since the WAL is opened at Open, the second Close closed
// it again and failed with "file already closed", which serve then
// reported as its own failure.
func TestCloseTwiceIsQuiet(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
