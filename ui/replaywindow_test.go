package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/ui"
)

// TestBulkReplayConfirmReplaysWhatWasCounted: the dead page filtered
// by a relative until ("older than an hour") counts the dead events
// older than an hour when the count is made; the confirmation must
// replay those, not the ones older than an hour when the operator
// presses the button. The confirmation form carries until=1h as typed,
// so the replay re-reads it against a later now and replays events the
// count never showed.
func TestBulkReplayConfirmReplaysWhatWasCounted(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	start := time.Now()
	old := storetest.Delivery("polar", "msg_old")
	old.ReceivedAt = start.Add(-90 * time.Minute)
	newer := storetest.Delivery("polar", "msg_newer")
	newer.ReceivedAt = start.Add(-50 * time.Minute)
	ids := storetest.Seed(t, st, hookbox.StatusDead, start, "the app is down", old, newer)

	var shift atomic.Int64 // how far the console's clock is ahead of start
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"polar"},
		Now: func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := browser(t)
	login(t, c, hs.URL)

	_, page := fetch(t, c, "GET", hs.URL+"/ui/dead?until=1h", nil)
	resp, page := fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dead page"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "1 events would be replayed") {
		t.Fatalf("dry run: %d, want 1 event counted\n%s", resp.StatusCode, page)
	}
	// The operator reads the count and confirms twenty minutes later.
	shift.Store(int64(20 * time.Minute))
	resp, page = fetch(t, c, "POST", hs.URL+"/ui/replay", replayForm(t, page, "dry run"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", resp.StatusCode, page)
	}
	if !strings.Contains(page, "Replayed 1 events") {
		_, got, _ := strings.Cut(page, `class="flash"`)
		got, _, _ = strings.Cut(got, "\n")
		t.Errorf("confirming a count of 1: %q, want 1 replayed", got)
	}
	ev, err := st.Event(context.Background(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != hookbox.StatusDead {
		t.Errorf("event %s, not counted by the dry run, is %s after the confirmation, want dead", ev.DeliveryID, ev.Status)
	}
}
