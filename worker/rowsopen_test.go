package worker_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestRowsLeftOpenSendNoCancel: a handler that returns with the rows of
// its query still open has them closed before its context is cancelled,
// so no cancel request goes to the server for them. Before, cancelling
// the context with the rows open made pgx send one (for each of 6 events
// here), and a loaded server may act on a cancel request late, when the
// transaction has gone on to its next statement: CI saw one land on the
// release of TestRowsLeftOpenAreClosed's handler's savepoint, and the
// handler, taken for one that broke its transaction, ran a second time.
func TestRowsLeftOpenSendNoCancel(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, cancels := pgtest.CountCancels(t, u.Host)
	u.Host = addr
	s := dbtest.Open(t, u.String())
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	p.SetPolicy("shop", fast)
	p.Handle("shop", "", leaveRowsOpen)
	var ds []hookbox.Delivery
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		ds = append(ds, storetest.Delivery("shop", id))
	}
	rs := ingest(t, s, ds...)
	start(t, p)
	for _, r := range rs {
		if e := waitEnded(t, s, p, r.ID); e.Status != hookbox.StatusDone || e.Attempts != 1 {
			t.Errorf("%s %s after %d attempts (last error %q), want done after 1", e.DeliveryID, e.Status, e.Attempts, e.LastError)
		}
	}
	if n := cancels(); n != 0 {
		t.Errorf("%d cancel requests sent for 6 handlers that left rows open, want none", n)
	}
}
