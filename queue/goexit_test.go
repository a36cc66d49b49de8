package queue_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/queue"
	"github.com/hookbox/hookbox/storetest"
)

// TestHandlerThatNeverReturnsLeavesNoTxOpen: a handler that does not
// return (it panics, or calls runtime.Goexit, as t.FailNow and
// log.Fatal-less "exit this goroutine" helpers do) must not leave the
// work transaction open: on SQLite it holds the only writer connection
// (every later write waits for ever), on PostgreSQL the picked rows stay
// locked, skipped by every claim, until the process stops.
func TestHandlerThatNeverReturnsLeavesNoTxOpen(t *testing.T) {
	for _, how := range []string{"panic", "goexit"} {
		t.Run(how, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, dbURL string) {
				s := dbtest.Open(t, dbURL)
				ctx := context.Background()
				if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("app", "a")}); err != nil {
					t.Fatal(err)
				}
				r := queue.Runner{Queue: s, Charge: func(ev *hookbox.Event, started time.Time, err error) hookbox.Outcome {
					return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDead, Error: err.Error()}
				}}
				p := hookbox.ClaimParams{Owner: "w-1", Limit: 1, Lease: time.Minute, Sources: []string{"app"}}
				exited := make(chan struct{})
				go func() {
					defer close(exited)
					defer func() { recover() }() // as net/http, or any caller, would
					r.ClaimWork(ctx, p, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
						if _, err := tx.ExecContext(ctx, `INSERT INTO effect_keys (scope, key) VALUES ('test', 'k')`); err != nil {
							t.Error(err)
						}
						if how == "panic" {
							panic("handler bug")
						}
						runtime.Goexit()
						return hookbox.Outcome{}
					})
				}()
				<-exited
				// The event is due, untouched: the next claim must get it.
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				p.Owner = "w-2"
				res, err := r.ClaimWork(cctx, p, func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) hookbox.Outcome {
					return hookbox.Outcome{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts, Status: hookbox.StatusDone}
				})
				if err != nil || len(res) != 1 || !res[0].Ran() {
					t.Fatalf("next ClaimWork = %+v, %v; want the event run (the first transaction was left open)", res, err)
				}
			})
		})
	}
}
