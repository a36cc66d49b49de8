package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// sessionTests are the cases of hookbox.SessionStore, run by Run.
var sessionTests = map[string]func(*testing.T, hookbox.Store){
	"SessionLiveUntilEnded":    testSessionLiveUntilEnded,
	"SessionLiveUntilExpiry":   testSessionLiveUntilExpiry,
	"SessionForgetsExpired":    testSessionForgetsExpired,
	"SessionConcurrentLogins":  testSessionConcurrentLogins,
	"SessionRefusedWhenClosed": testSessionRefusedWhenClosed,
}

func startSession(t *testing.T, s hookbox.Store, id string, now, expires time.Time) {
	t.Helper()
	if err := s.StartSession(context.Background(), hookbox.Session{ID: id, Expires: expires, Now: now}); err != nil {
		t.Fatalf("StartSession %s: %v", id, err)
	}
}

func sessionLive(t *testing.T, s hookbox.Store, id string, now time.Time) bool {
	t.Helper()
	live, err := s.SessionLive(context.Background(), id, now)
	if err != nil {
		t.Fatalf("SessionLive %s: %v", id, err)
	}
	return live
}

// testSessionLiveUntilEnded: a started session is live, others are not;
// once ended it is not, and ending it again, or ending one never started,
// is no error.
func testSessionLiveUntilEnded(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	if sessionLive(t, s, "a", now) {
		t.Fatal("a session never started is live")
	}
	startSession(t, s, "a", now, now.Add(time.Hour))
	startSession(t, s, "b", now, now.Add(time.Hour))
	if !sessionLive(t, s, "a", now) || !sessionLive(t, s, "b", now) {
		t.Fatal("started sessions are not live")
	}
	if sessionLive(t, s, "c", now) {
		t.Fatal("a session never started is live beside started ones")
	}
	if err := s.EndSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if sessionLive(t, s, "a", now) {
		t.Fatal("an ended session is live")
	}
	if !sessionLive(t, s, "b", now) {
		t.Fatal("ending one session ended another")
	}
	for _, id := range []string{"a", "never"} {
		if err := s.EndSession(ctx, id); err != nil {
			t.Fatalf("ending %q, not remembered: %v", id, err)
		}
	}
}

// testSessionLiveUntilExpiry: a session is live before its expiry and
// not from then on, even before any login forgets it.
func testSessionLiveUntilExpiry(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	exp := now.Add(time.Hour)
	startSession(t, s, "x", now, exp)
	if !sessionLive(t, s, "x", exp.Add(-time.Millisecond)) {
		t.Fatal("a session is not live just before its expiry")
	}
	if sessionLive(t, s, "x", exp) || sessionLive(t, s, "x", exp.Add(time.Hour)) {
		t.Fatal("a session is live at or past its expiry")
	}
}

// testSessionForgetsExpired: logins forget expired sessions, a few each,
// so the store keeps about the live ones; live ones are kept.
func testSessionForgetsExpired(t *testing.T, s hookbox.Store) {
	now := time.Now().Truncate(time.Millisecond)
	for i := range 10 {
		startSession(t, s, fmt.Sprint("old", i), now, now.Add(time.Minute))
	}
	startSession(t, s, "long", now, now.Add(time.Hour))
	later := now.Add(2 * time.Minute)
	for i := range 3 {
		startSession(t, s, fmt.Sprint("new", i), later, later.Add(time.Hour))
	}
	var n int
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d sessions kept after 3 logins past the expiry of 10 others; want the 4 unexpired", n)
	}
	if !sessionLive(t, s, "long", later) {
		t.Fatal("a login forgot a live session")
	}
}

// testSessionConcurrentLogins: logins at once, each forgetting expired
// sessions, all succeed and are all live; logouts at once end them all.
func testSessionConcurrentLogins(t *testing.T, s hookbox.Store) {
	const logins = 16
	now := time.Now().Truncate(time.Millisecond)
	for i := range 3 * logins {
		startSession(t, s, fmt.Sprint("expired", i), now.Add(-time.Hour), now.Add(-time.Minute))
	}
	run := func(fn func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, logins)
		for i := range logins {
			wg.Go(func() { errs[i] = fn(i) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("session %d: %v", i, err)
			}
		}
	}
	run(func(i int) error {
		return s.StartSession(context.Background(), hookbox.Session{ID: fmt.Sprint("s", i), Expires: now.Add(time.Hour), Now: now})
	})
	for i := range logins {
		if !sessionLive(t, s, fmt.Sprint("s", i), now) {
			t.Fatalf("session %d, started at once with others, is not live", i)
		}
	}
	run(func(i int) error { return s.EndSession(context.Background(), fmt.Sprint("s", i)) })
	for i := range logins {
		if sessionLive(t, s, fmt.Sprint("s", i), now) {
			t.Fatalf("session %d, ended at once with others, is live", i)
		}
	}
}

// testSessionRefusedWhenClosed: a store that cannot answer says so with
// an error; it never reports a session live.
func testSessionRefusedWhenClosed(t *testing.T, s hookbox.Store) {
	now := time.Now()
	startSession(t, s, "a", now, now.Add(time.Hour))
	s.Close()
	live, err := s.SessionLive(context.Background(), "a", now)
	if !errors.Is(err, hookbox.ErrUnavailable) || live {
		t.Fatalf("SessionLive on a closed store: %v, %v; want ErrUnavailable and not live", live, err)
	}
	if err := s.EndSession(context.Background(), "a"); !errors.Is(err, hookbox.ErrUnavailable) {
		t.Fatalf("EndSession on a closed store: %v; want ErrUnavailable", err)
	}
}
