package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
)

// TestCancelledCallsSayCancelled: a call whose context was cancelled (a
// worker pool stopping) fails with an error that is both
// hookbox.ErrUnavailable and context.Canceled. The cause was formatted as
// text, so the pool, which leaves cancelled calls out of its log, logged
// "claim for targets … begin: context canceled" as an ERROR at every stop
// under load.
func TestCancelledCallsSayCancelled(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, claimErr := s.Claim(cancelled, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{"s"}})
	_, ingestErr := s.BeginIngest(cancelled)
	_, workErr := s.BeginWork(cancelled)
	for what, err := range map[string]error{"claim": claimErr, "begin ingest": ingestErr, "begin work": workErr} {
		if !errors.Is(err, context.Canceled) || !errors.Is(err, hookbox.ErrUnavailable) {
			t.Errorf("%s with a cancelled context: %v; want an error that is context.Canceled and hookbox.ErrUnavailable", what, err)
		}
	}
}
