package sqlite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// erasure is one way an operator asks for data to be gone: keep stores
// rows that hold marker (and rows that do not, which stay), and remove
// deletes those that hold it, as retention or the console would.
type erasure struct {
	name   string
	keep   func(t *testing.T, s *Store, marker []byte)
	remove func(t *testing.T, s *Store)
}

// erasures are the deletions retention and the console make.
var erasures = []erasure{
	{"purge", func(t *testing.T, s *Store, marker []byte) {
		seedAround(t, s, hookbox.StatusDone, marker)
	}, func(t *testing.T, s *Store) {
		res, err := s.Purge(context.Background(), hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour)})
		if err != nil || res.Done == 0 {
			t.Fatalf("Purge = %+v, %v; want the old events deleted", res, err)
		}
	}},
	{"clear payloads", func(t *testing.T, s *Store, marker []byte) {
		seedAround(t, s, hookbox.StatusDone, marker)
	}, func(t *testing.T, s *Store) {
		n, err := s.ClearPayloads(context.Background(), time.Now().Add(-24*time.Hour))
		if err != nil || n == 0 {
			t.Fatalf("ClearPayloads = %d, %v; want the old payloads cleared", n, err)
		}
	}},
	{"clear sender data", seedSenderData, func(t *testing.T, s *Store) {
		n, err := s.ClearPayloads(context.Background(), time.Now().Add(-24*time.Hour))
		if err != nil || n == 0 {
			t.Fatalf("ClearPayloads = %d, %v; want the old events cleared", n, err)
		}
	}},
	{"rejected log trim", func(t *testing.T, s *Store, marker []byte) {
		ctx := context.Background()
		var rs []hookbox.Rejection
		for i := range 40 {
			r := hookbox.Rejection{Source: "s", ReceivedAt: time.Now(), Status: 401, Reason: "bad signature",
				Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), BodySize: 8}
			if i%4 == 1 {
				r.ReceivedAt, r.Body = time.Now().Add(-48*time.Hour), marker
				r.BodySize, r.BodyComplete = int64(len(marker)), true
			}
			rs = append(rs, r)
		}
		if _, err := s.AddRejections(ctx, rs, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
	}, func(t *testing.T, s *Store) {
		// What serve's hourly trim does: a write with nothing to add.
		n, err := s.AddRejections(context.Background(), nil, hookbox.RejectionBounds{Since: time.Now().Add(-24 * time.Hour)})
		if err != nil || n == 0 {
			t.Fatalf("trim = %d, %v; want the old rejections deleted", n, err)
		}
	}},
}

// seedAround stores, in one source, events finished two days ago with
// marker as their payload between others with payloads of their own,
// then one newer event (a purge keeps the newest: keepsNewest).
func seedAround(t *testing.T, s *Store, st hookbox.Status, marker []byte) {
	t.Helper()
	old := time.Now().Add(-48 * time.Hour)
	var ds []hookbox.Delivery
	for i := range 40 {
		d := storetest.Delivery("s", fmt.Sprint("d", i))
		if i%4 == 1 {
			d.Payload = marker
		}
		ds = append(ds, d)
	}
	storetest.Seed(t, s, st, old, "", ds...)
	storetest.Seed(t, s, hookbox.StatusDone, time.Now(), "", storetest.Delivery("s", "newer"))
}

// seedSenderData stores, as seedAround does, events finished two days
// ago, some of which hold the marker (the first word of payload) in more
// than their payload: a header, their order key, and the error of a
// failed first attempt, which a target's reply or a command's output can
// echo. Payload retention must take it from all of them.
func seedSenderData(t *testing.T, s *Store, payload []byte) {
	t.Helper()
	ctx := context.Background()
	marker := string(bytes.Fields(payload)[0])
	old := time.Now().Add(-48 * time.Hour)
	var ds []hookbox.Delivery
	for i := range 20 {
		key := fmt.Sprint("k", i)
		if i%4 == 1 {
			key = marker + key
		}
		d := storetest.Keyed("s", "app", fmt.Sprint("d", i), key)
		if i%4 == 1 {
			d.Payload = payload
			d.Header.Set("X-Shop-Domain", marker)
		}
		ds = append(ds, d)
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	work := func(st func(hookbox.Event) (hookbox.Status, string)) {
		t.Helper()
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "seed", Limit: 100, Lease: time.Minute,
			Sources: []string{"s/app"}, ByKey: true, Now: time.Now()})
		if err != nil || len(evs) == 0 {
			t.Fatalf("claim = %d, %v", len(evs), err)
		}
		var outs []hookbox.Outcome
		for _, e := range evs {
			o := hookbox.Outcome{ID: e.ID, Owner: e.LeaseOwner, Attempt: e.Attempts, RetryAt: old, StartedAt: old, FinishedAt: old}
			o.Status, o.Error = st(e)
			outs = append(outs, o)
		}
		if _, err := s.Finish(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
	// A first attempt the app refuses with the marker in its reply, then
	// the second done; every other delivery done at once.
	work(func(e hookbox.Event) (hookbox.Status, string) {
		if strings.HasPrefix(e.OrderKey, marker) {
			return hookbox.StatusPending, "the app answered 422: " + marker
		}
		return hookbox.StatusDone, ""
	})
	work(func(hookbox.Event) (hookbox.Status, string) { return hookbox.StatusDone, "" })
	// The events themselves (FanOut records) are done from the moment
	// they are stored: make them as old as their deliveries.
	if _, err := s.writer.ExecContext(ctx, `UPDATE events SET updated_at = ? WHERE fanout`, millis(old)); err != nil {
		t.Fatal(err)
	}
	storetest.Seed(t, s, hookbox.StatusDone, time.Now(), "", storetest.Delivery("s", "newer"))
}

// markerOf returns a random text repeated to about size bytes: each copy
// is whole within any page of 4 KiB that holds part of the payload.
func markerOf(t *testing.T, size int) (marker, payload []byte) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	marker = []byte("gone-" + hex.EncodeToString(b))
	unit := append(append([]byte{}, marker...), ' ')
	return marker, bytes.Repeat(unit, max(1, size/len(unit)))
}

// filesHolding names the files of the store (the database, its WAL)
// whose bytes hold marker.
func filesHolding(t *testing.T, s *Store, marker []byte) []string {
	t.Helper()
	var in []string
	for _, name := range []string{s.path, s.path + "-wal"} {
		b, err := os.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, marker) {
			in = append(in, name)
		}
	}
	return in
}

// TestDeletedLeavesNoCopy: what a purge, a payload clear or a trim of the
// rejected log deletes is gone from the files, not only from the tables:
// no byte of it is left in the database file's free space or in the WAL
// once the deletion has returned and the background checkpoint ran. An
// operator who purges personal data after N days must not find it with
// `strings hookbox.db`. Payloads of both kinds: kept in the row's own page
// (300 bytes) and in overflow pages (20 KiB).
func TestDeletedLeavesNoCopy(t *testing.T) {
	for _, size := range []int{300, 20 << 10} {
		for _, e := range erasures {
			t.Run(fmt.Sprintf("%s/%d", e.name, size), func(t *testing.T) {
				s := openTemp(t)
				marker, payload := markerOf(t, size)
				e.keep(t, s, payload)
				if filesHolding(t, s, marker) == nil {
					t.Fatal("the marker is in no file before the deletion: the test sees nothing")
				}
				e.remove(t, s)
				awaitWALEmptied(t, s)
				// The background loop's checkpoint, run now rather than
				// awaited: the newest page images go into the file.
				if _, err := s.checkpointer.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
					t.Fatal(err)
				}
				if in := filesHolding(t, s, marker); in != nil {
					t.Errorf("after the %s, the deleted bytes are still in %v", e.name, in)
				}
			})
		}
	}
}

// awaitWALEmptied waits until the WAL is empty, as the deletion leaves
// it: at once, or, when the checkpoint it ran found the background loop's
// own under way (SQLite then refuses a second one at once, without the
// busy timeout), at one of the loop's next ticks (the deletion's mark,
// see emptyWAL). Nothing is written after the deletion, so a WAL that is
// never emptied means the deletion did not ask for it: the wait fails.
func awaitWALEmptied(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fi, err := os.Stat(s.path + "-wal")
		switch {
		case os.IsNotExist(err):
			return
		case err != nil:
			t.Fatal(err)
		case fi.Size() == 0:
			return
		case time.Now().After(deadline):
			t.Fatalf("30 s after the deletion, the WAL still holds %d bytes", fi.Size())
		}
	}
}

// TestEndedSessionLeavesNoCopy: a console logout deletes the session's
// row, and with it every byte of its key from the files.
func TestEndedSessionLeavesNoCopy(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	now := time.Now()
	for i := range 20 {
		if err := s.StartSession(ctx, hookbox.Session{ID: fmt.Sprint("other-", i), Expires: now.Add(time.Hour), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	const id = "the-session-that-ends"
	if err := s.StartSession(ctx, hookbox.Session{ID: id, Expires: now.Add(time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	key := hookbox.SessionKey(id)
	if filesHolding(t, s, key) == nil {
		t.Fatal("the session's key is in no file: the test sees nothing")
	}
	if err := s.EndSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	if in := filesHolding(t, s, key); in != nil {
		t.Errorf("after the logout, the session's key is still in %v", in)
	}
}

// TestWALEmptiedOnceReadersLeave: a reader that holds a snapshot from
// before a purge keeps the WAL from being emptied right after it (the
// purge does not wait for it); the background loop empties it once the
// reader has gone, without another purge.
func TestWALEmptiedOnceReadersLeave(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	marker, payload := markerOf(t, 300)
	seedAround(t, s, hookbox.StatusDone, payload)
	rtx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if in := filesHolding(t, s, marker); len(in) == 0 {
		t.Fatal("the purged bytes are in no file while a reader holds a snapshot from before the purge: the test sees nothing")
	}
	rtx.Rollback()
	for deadline := time.Now().Add(30 * time.Second); filesHolding(t, s, marker) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the reader left, the purged bytes are still in %v", filesHolding(t, s, marker))
		}
	}
}

// TestWALEmptiedAfterAnotherProcessPurged: a purge by another process
// (`hookbox purge` from a timer, beside serve) that a reader kept from
// emptying the WAL leaves that to the process that stays: the purging
// one exits at once, and its retries with it. Two stores on one file
// stand for the two processes.
func TestWALEmptiedAfterAnotherProcessPurged(t *testing.T) {
	ctx := context.Background()
	serve := openTemp(t)
	marker, payload := markerOf(t, 300)
	seedAround(t, serve, hookbox.StatusDone, payload)
	rtx, err := serve.reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	cli, err := Open(ctx, serve.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if in := filesHolding(t, serve, marker); len(in) == 0 {
		t.Fatal("the purged bytes are in no file while a reader holds a snapshot from before the purge: the test sees nothing")
	}
	rtx.Rollback()
	for deadline := time.Now().Add(30 * time.Second); filesHolding(t, serve, marker) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the reader left, the bytes the other process purged are still in %v", filesHolding(t, serve, marker))
		}
	}
}
