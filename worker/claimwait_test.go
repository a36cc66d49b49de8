package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestFreedSlotsEndClaimDelay: with a backlog and every slot busy, the
// claim after a wake-up comes as soon as enough slots have freed to make
// it worth a transaction (half of min(Concurrency, BatchSize): 2 of 4
// here), not after ClaimDelay (an hour here); and a lone freed slot
// still waits for ClaimDelay, so claims stay batched. The claim loop
// woke at the first freed slot, then waited out ClaimDelay whatever
// freed meanwhile: at the default concurrency a forward drain spent
// most of each round in that wait (about 8k events/s with the cores
// half idle).
func TestFreedSlotsEndClaimDelay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s := dbtest.Open(t, dbURL)
		release := make(chan struct{})
		started := make(chan string, 16)
		// What the claim loop reports when it waits: whether it woke, and
		// the slots freed since its last claim.
		type wait struct {
			woken bool
			freed int
		}
		waits := make(chan wait, 1024)
		p := New(s, Options{Concurrency: 4, ClaimDelay: time.Hour, PollInterval: time.Hour,
			onClaimWait: func(woken bool, freed int) {
				select {
				case waits <- wait{woken, freed}:
				default:
				}
			}})
		p.Route("fwd", TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			started <- ev.DeliveryID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
		var ds []hookbox.Delivery
		for i := range 8 {
			ds = append(ds, storetest.Delivery("fwd", fmt.Sprint(i)))
		}
		if _, err := storetest.IngestRetried(t, s, ds); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			close(release)
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Stop(stopCtx)
		}()
		awaitStarts := func(n int) {
			t.Helper()
			deadline := time.After(20 * time.Second)
			for range n {
				select {
				case <-started:
				case <-deadline:
					t.Fatalf("after 20s, fewer than %d more deliveries started", n)
				}
			}
		}
		awaitWait := func(want wait) {
			t.Helper()
			deadline := time.After(20 * time.Second)
			for {
				select {
				case w := <-waits:
					if w == want {
						return
					}
				case <-deadline:
					t.Fatalf("after 20s the claim loop has not waited with %+v", want)
				}
			}
		}
		// Every slot busy, 4 events left due: the loop sleeps until a
		// wake-up (it cannot claim before a slot frees).
		awaitStarts(4)
		awaitWait(wait{woken: false})
		release <- struct{}{}
		awaitWait(wait{woken: true, freed: 1})
		// A claim for one slot would be one transaction for one event:
		// the loop waits, and nothing more has started.
		select {
		case id := <-started:
			t.Fatalf("delivery %s started on the lone freed slot, before ClaimDelay", id)
		default:
		}
		// A second freed slot makes a claim worth it: it comes now.
		release <- struct{}{}
		awaitStarts(2)
	})
}
