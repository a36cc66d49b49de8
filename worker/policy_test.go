package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestBackoffBounds: a retry waits between BackoffMin and BackoffMax
// whatever the attempt number, including numbers below 1 (read as 1: a
// shift by a negative count panicked) and those whose doubling would
// overflow.
func TestBackoffBounds(t *testing.T) {
	p := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Minute}
	for _, n := range []int{-3, 0, 1, 2, 7, 62, 63, 64, 1000} {
		for range 20 {
			if d := p.Backoff(n); d < p.BackoffMin || d > p.BackoffMax {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, d, p.BackoffMin, p.BackoffMax)
			}
		}
	}
}

// TestFirstRetryJittered: the waits before the first retry of many events
// spread over [BackoffMin, 2·BackoffMin], so that a burst of events that
// failed together does not retry together, and those before later retries
// over [BackoffMin, min(BackoffMax, BackoffMin·2ⁿ⁻¹)], as they always
// did. Backoff(1) always returned BackoffMin.
func TestFirstRetryJittered(t *testing.T) {
	p := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Minute}
	for _, c := range []struct {
		n       int
		ceiling time.Duration
	}{{-3, 2 * time.Second}, {1, 2 * time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, time.Minute}} {
		const draws = 1000
		// Count the draws in each quarter of the range: each should get
		// about 250; fewer than 100 in any means the waits bunch up (the
		// chance of that with uniform draws is below 1e-25).
		var quarters [4]int
		span := c.ceiling - p.BackoffMin
		for range draws {
			d := p.Backoff(c.n)
			if d < p.BackoffMin || d > c.ceiling {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", c.n, d, p.BackoffMin, c.ceiling)
			}
			quarters[min(int(4*(d-p.BackoffMin)/(span+1)), 3)]++
		}
		for i, k := range quarters {
			if k < 100 {
				t.Errorf("Backoff(%d): %d of %d draws in quarter %d of [%v, %v] (by quarter: %v), want them spread", c.n, k, draws, i+1, p.BackoffMin, c.ceiling, quarters)
			}
		}
	}
	// No room to spread: BackoffMax is the floor.
	flat := worker.Policy{BackoffMin: time.Second, BackoffMax: time.Second}
	if d := flat.Backoff(1); d != time.Second {
		t.Errorf("Backoff(1) = %v with BackoffMin = BackoffMax = 1s", d)
	}
}

// TestRetryAfterPastBackoffMax: a Retry-After longer than the policy's
// BackoffMax is honoured (here 1 s against a BackoffMax of 10 ms); it was
// cut to BackoffMax, so a rate-limited app was called again early, each
// early call using up an attempt.
func TestRetryAfterPastBackoffMax(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 5 * time.Millisecond})
		var mu sync.Mutex
		var at []time.Time
		p.Route("limited", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) == 1 {
				return worker.RetryAfter(errors.New("429 Too Many Requests"), time.Second)
			}
			return nil
		}))
		p.SetPolicy("limited", worker.Policy{MaxAttempts: 5, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond, Timeout: 5 * time.Second})
		start(t, p)
		rs := ingest(t, s, storetest.Delivery("limited", "1"))
		waitStatus(t, s, p, rs[0].ID, hookbox.StatusDone)
		mu.Lock()
		defer mu.Unlock()
		if len(at) != 2 {
			t.Fatalf("%d attempts, want 2", len(at))
		}
		if gap := at[1].Sub(at[0]); gap < time.Second-10*time.Millisecond {
			t.Errorf("the retry came %v after a Retry-After of 1s (BackoffMax 10ms)", gap)
		}
	})
}

// TestDefaultPolicyOutlivesAnOutage: with the default policy and a
// target's default circuit breaking (config.DefaultCircuitAfter failures
// in a row, a first cool-down of config.DefaultCircuitCooldown), events
// that fail for as long as the app is down are all still pending after
// an outage of an hour, and done once it ends. Every duration is scaled
// down 1,000 times (a second of backoff is a millisecond here, the hour
// 3.6 s). With 10 attempts, as before, every event was dead within 8.5
// minutes at most, 4 on average.
//
// The scaled run leaves out one bound: worker.MaxCooldown, 10 minutes,
// stays 10 minutes, where the scaled circuit would stop doubling its
// cool-down at 0.6 s, so its later trials are sparser than a real one's.
// The figures for real time are logged from the same two schedules:
// the default backoff (Policy.Backoff) and the cool-downs of an open
// circuit, of which each attempt after the fifth waits at least one.
func TestDefaultPolicyOutlivesAnOutage(t *testing.T) {
	const scale = 1000
	pol := worker.DefaultPolicy
	after, cooldown := config.DefaultCircuitAfter, config.DefaultCircuitCooldown

	// Real time: one event alone, failing every attempt.
	survive := func(circuit bool) time.Duration {
		var total time.Duration
		cool := cooldown
		for n := 1; n < pol.MaxAttempts; n++ {
			w := pol.Backoff(n)
			if circuit && n >= after {
				w = max(w, cool)
				cool = min(2*cool, worker.MaxCooldown)
			}
			total += w
		}
		return total
	}
	for _, circuit := range []bool{false, true} {
		var xs []time.Duration
		for range 10000 {
			xs = append(xs, survive(circuit))
		}
		slices.Sort(xs)
		t.Logf("default policy, circuit breaking %v: an event that always fails is dead after %v at least, %v in 1%% of cases, %v in half, %v at most (10,000 draws)",
			circuit, xs[0].Round(time.Minute), xs[len(xs)/100].Round(time.Minute), xs[len(xs)/2].Round(time.Minute), xs[len(xs)-1].Round(time.Minute))
		if circuit && xs[0] < time.Hour {
			t.Errorf("with circuit breaking an event can be dead %v into an outage, want an hour at least", xs[0])
		}
	}

	// Scaled: a real pool. Source burst gets 20 events at once and one
	// more in the middle, whose attempts its circuit's trials share out;
	// source lone gets one event, which every trial is.
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		p := worker.New(s, worker.Options{PollInterval: 2 * time.Millisecond})
		var down atomic.Bool
		down.Store(true)
		var attempts atomic.Int64
		scaled := pol
		scaled.BackoffMin, scaled.BackoffMax = pol.BackoffMin/scale, pol.BackoffMax/scale
		for _, src := range []string{"burst", "lone"} {
			p.Route(src, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
				attempts.Add(1)
				if down.Load() {
					return errors.New("connect: connection refused")
				}
				return nil
			}))
			p.SetPolicy(src, scaled)
			p.SetControls(src, worker.Controls{CircuitAfter: after, CircuitCooldown: cooldown / scale})
		}
		start(t, p)
		ds := []hookbox.Delivery{storetest.Delivery("lone", "1")}
		for i := range 20 {
			ds = append(ds, storetest.Delivery("burst", fmt.Sprint(i)))
		}
		rs := ingest(t, s, ds...)
		outage := time.Hour / scale
		time.Sleep(outage / 2)
		rs = append(rs, ingest(t, s, storetest.Delivery("burst", "later"))...)
		time.Sleep(outage / 2)
		for _, r := range rs {
			if e, err := s.Event(context.Background(), r.ID); err != nil || e.Status == hookbox.StatusDead {
				t.Fatalf("event %d of %s is %s (%v) at the end of an outage of an hour (scaled), after %d attempts", r.ID, e.Source, e.Status, err, e.Attempts)
			}
		}
		t.Logf("an hour's outage (scaled) used %d attempts of %d events", attempts.Load(), len(rs))
		down.Store(false)
		for _, r := range rs {
			waitStatus(t, s, p, r.ID, hookbox.StatusDone)
		}
	})
}
