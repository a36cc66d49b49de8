package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestClearPayloadsFinishesAnOlderClearing: an event whose payload an
// older hookbox cleared kept its headers and last error; the next
// run clears those too, and the run after it finds nothing.
func TestClearPayloadsFinishesAnOlderClearing(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := context.Background()
	d := storetest.Delivery("s", "1")
	d.Header.Set("X-Shop-Domain", "shop.example")
	id := storetest.Seed(t, s, hookbox.StatusDone, time.Now().Add(-48*time.Hour), "", d)[0]
	// What ClearPayloads did before it dropped more than the payload.
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `UPDATE event_data SET payload = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE queue SET last_error = 'the app answered 422' WHERE id = $1`, id); err != nil {
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
