package worker

import (
	"context"
	"fmt"
	"sync"
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
		p.Route("fwd", heldTarget(started, release))
		startBacklog(t, s, p, "fwd", 8, release)
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
		awaitStarted(t, started, 4, time.After(20*time.Second), "deliveries")
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
		awaitStarted(t, started, 2, time.After(20*time.Second), "more deliveries")
	})
}

// TestRateTokenEndsWaitForSlots: a route with a rate, whose claim took
// every token it had, is claimed again when its next token comes, not
// at the next wake-up or poll (an hour here), even when too few slots
// are free for a claim worth its transaction (claimWorth: 2 of 4 here),
// where the claim loop waits for a wake-up rather than claim again at
// once. Its target holds each delivery, so no slot frees and nothing
// wakes the loop: a rate of 2 a second starts 2 events, a third half a
// second later, and a fourth, on the last free slot, half a second
// after that. What the round leaves (claimLeased, to whoever has events
// due) reads the route's allowance again and sets the loop's sleep to
// its next token.
func TestRateTokenEndsWaitForSlots(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		release := make(chan struct{})
		started := make(chan string, 16)
		p := New(s, Options{Concurrency: 4, PollInterval: time.Hour})
		p.Route("slow", heldTarget(started, release))
		p.SetControls("slow", Controls{Rate: 2})
		startBacklog(t, s, p, "slow", 6, release)
		awaitStarted(t, started, 4, time.After(20*time.Second), "deliveries (a rate of 2 a second, 4 slots)")
	})
}

// TestCappedRouteBelowClaimWorth: a route whose max_concurrency (2) is
// below claimWorth (4 of 8 slots here), with the other slots free and a
// backlog, is claimed again each time its deliveries end, not at the
// next poll (an hour here): its freed slots never reach claimWorth, and
// the loop's wait after them ends at ClaimDelay. It never runs more
// than its 2 at once.
func TestCappedRouteBelowClaimWorth(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const events = 20
		s := dbtest.Open(t, dbURL)
		var mu sync.Mutex
		running, widest, delivered := 0, 0, 0
		all := make(chan struct{})
		p := New(s, Options{Concurrency: 8, PollInterval: time.Hour})
		p.Route("capped", TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			running++
			widest = max(widest, running)
			mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			running--
			if delivered++; delivered == events {
				close(all)
			}
			return nil
		}))
		p.SetControls("capped", Controls{MaxConcurrency: 2})
		startBacklog(t, s, p, "capped", events, nil)
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("after 20s, %d of %d events delivered", delivered, events)
		}
		mu.Lock()
		defer mu.Unlock()
		if widest > 2 {
			t.Errorf("%d deliveries of the route ran at once, want at most its max_concurrency, 2", widest)
		}
	})
}

// TestSlotsFreedBeforeTheWaitWakeIt: a claim that took every slot (4
// of 4 events asked, 4 more due) leaves the claim loop to wait for
// slots; when every delivery has ended before the loop reaches its wait
// (held here, in onClaimWait, until they have), their slots count as
// freed, and the next claim comes at once, with ClaimDelay and
// PollInterval an hour: the wake-ups they sent are still there to be
// taken, and the loop counts its slots before they freed.
func TestSlotsFreedBeforeTheWaitWakeIt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		release := make(chan struct{})
		started := make(chan string, 16)
		var p *Pool
		first, held := true, make(chan struct{})
		p = New(s, Options{Concurrency: 4, ClaimDelay: time.Hour, PollInterval: time.Hour,
			onClaimWait: func(woken bool, _ int) {
				// Called by the claim loop only: first is its own.
				if woken || !first {
					return
				}
				first = false
				for range 4 {
					<-started
				}
				for range 4 {
					release <- struct{}{}
				}
				for p.freeSlots() < 4 {
					time.Sleep(time.Millisecond)
				}
				close(held)
			}})
		p.Route("fwd", heldTarget(started, release))
		startBacklog(t, s, p, "fwd", 8, release)
		deadline := time.After(20 * time.Second)
		select {
		case <-held:
		case <-deadline:
			t.Fatal("after 20s, the claim loop has not waited after claiming 4 events")
		}
		awaitStarted(t, started, 4, deadline, "events left")
	})
}

// TestHangingSlotsDoNotCountTowardsClaimWorth: slots held by deliveries
// that hang (a target that does not answer) are not slots a claim can
// wait for. Here a hanging queue holds 6 of 8 slots (claimWorth 4), a
// healthy one 2 and has a backlog: its 2 deliveries ending must bring
// the claim of 2 more at once, not after ClaimDelay (an hour here).
// Without it, the slots that can free never reached claimWorth, and
// every round of the healthy queue waited the whole ClaimDelay for as
// long as the other hung. The hanging queue's slots taken in the first
// round count as slow once a whole later round has passed (the second);
// it takes its last 2 in the third, when the healthy queue's first
// events are all claimed ("what is left", see claimLeased).
func TestHangingSlotsDoNotCountTowardsClaimWorth(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		release, hang := make(chan struct{}), make(chan struct{})
		started, hung := make(chan string, 16), make(chan string, 16)
		p := New(s, Options{Concurrency: 8, ClaimDelay: time.Hour, PollInterval: time.Hour})
		p.Route("fwd", heldTarget(started, release))
		p.Route("hang", heldTarget(hung, hang)) // released only when the test ends
		ingestN(t, s, "fwd", "a", 10)
		startBacklog(t, s, p, "hang", 6, hang)
		t.Cleanup(func() { close(release) })
		// 20 s for each step, not for them all: the bug costs an hour
		// (ClaimDelay), and a CI run under load took more than 20 s for
		// the steps together.
		await := func(ch <-chan string, n int, what string) {
			t.Helper()
			awaitStarted(t, ch, n, time.After(20*time.Second), what)
		}
		// Round 1: each queue its share, 4 of 8 slots.
		await(hung, 4, "hanging deliveries (round 1)")
		await(started, 4, "healthy deliveries (round 1)")
		// Round 2: the healthy queue's 4 ended, 4 more of it.
		for range 4 {
			release <- struct{}{}
		}
		await(started, 4, "healthy deliveries (round 2)")
		// Round 3: the healthy queue has 2 left; the hanging one takes
		// the 2 slots left, and holds 6 of 8.
		for range 4 {
			release <- struct{}{}
		}
		await(started, 2, "healthy deliveries (round 3)")
		await(hung, 2, "hanging deliveries (round 3)")
		ingestN(t, s, "fwd", "b", 8)
		p.Notify()
		// 2 slots free of the 8, the 6 others hang: a claim worth it.
		for range 2 {
			release <- struct{}{}
		}
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("after 20s, no healthy delivery started on the 2 slots freed beside 6 hanging ones: " +
				"the claim waited for ClaimDelay (an hour)")
		}
		await(started, 1, "more healthy deliveries (the second of 2 freed slots)")
	})
}

// heldTarget is a target that sends each delivery's id on started when
// it begins, and holds it until a value (or the close) of release, or
// the end of its context.
func heldTarget(started chan<- string, release <-chan struct{}) TargetFunc {
	return func(ctx context.Context, ev *hookbox.Event) error {
		started <- ev.DeliveryID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startBacklog stores n deliveries of source in s, starts p, and stops
// it when the test ends, after closing release (unless nil), so that
// the deliveries a heldTarget holds end.
func startBacklog(t *testing.T, s hookbox.Store, p *Pool, source string, n int, release chan struct{}) {
	t.Helper()
	ingestN(t, s, source, "", n)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if release != nil {
			close(release)
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(stopCtx)
	})
}

// ingestN stores n deliveries of source in s, their ids prefix and a
// number from 0.
func ingestN(t *testing.T, s hookbox.Store, source, prefix string, n int) {
	t.Helper()
	var ds []hookbox.Delivery
	for i := range n {
		ds = append(ds, storetest.Delivery(source, fmt.Sprint(prefix, i)))
	}
	if _, err := storetest.IngestRetried(t, s, ds); err != nil {
		t.Fatal(err)
	}
}

// awaitStarted waits for n deliveries to start (their ids sent on
// started by heldTarget), and fails the test, naming them what, once
// deadline (20 s from a point the caller chose) has passed.
func awaitStarted(t *testing.T, started <-chan string, n int, deadline <-chan time.Time, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("after 20s, %d of %d %s started", i, n, what)
		}
	}
}
