package hookbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestRetireAccountsForPickedDelivery: a retire that runs while a work
// transaction (the Go handlers of a process still on the old config)
// holds one of the name's pending deliveries ends it once that
// transaction has rolled back, or counts it in flight: whatever it leaves
// unfinished is what it reported in flight. On PostgreSQL it skipped the
// locked row, reported none in flight, and left the delivery pending
// under a name nothing works once the handler's transaction rolled back.
func TestRetireAccountsForPickedDelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("rw", "1"), storetest.Delivery("rw", "2")}); err != nil {
			t.Fatal(err)
		}
		w, err := s.BeginWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		picked, _, err := w.Pick(ctx, hookbox.ClaimParams{Owner: "old-process", Limit: 1, Lease: time.Minute, Sources: []string{"rw"}})
		if err != nil || len(picked) != 1 {
			w.Rollback()
			t.Fatalf("pick: %d events, %v", len(picked), err)
		}
		type out struct {
			res hookbox.RetireResult
			err error
		}
		done := make(chan out, 1)
		go func() {
			res, err := s.RetireTarget(ctx, hookbox.RetireParams{Name: "rw", Reason: hookbox.RetireReason("rw")})
			done <- out{res, err}
		}()
		var got out
		select {
		case got = <-done: // PostgreSQL: the retire does not wait for the work transaction
			w.Rollback() // the handler failed
		case <-time.After(3 * time.Second): // SQLite: it waits for the write lock
			w.Rollback()
			got = <-done
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		b, err := s.TargetBacklog(ctx, "rw", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if b.Unfinished() != got.res.InFlight {
			t.Errorf("retire reported %+v, but %d deliveries of rw are left unfinished (%d pending) with nothing working them",
				got.res, b.Unfinished(), b.Pending)
		}
	})
}
