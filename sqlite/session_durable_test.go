package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/storetest"
)

// TestLogoutSurvivesPowerLoss: a logout (EndSession) is on disk when it
// returns: the files as they were at the last fsync, which a power loss
// leaves, do not hold the ended session.
func TestLogoutSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
