package worker

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestFailedTrialNeverShortensCooldown: a failed trial doubles the
// cool-down up to MaxCooldown (README: "its failure doubles the
// cool-down (up to 10 min)"). A first cool-down above MaxCooldown (a
// circuit_cooldown of 30m, which config accepts) fell to 10 min after the
// first failed trial; a huge one wrapped to a negative cool-down, and the
// circuit reopened already over: trial after trial, no pause at all.
func TestFailedTrialNeverShortensCooldown(t *testing.T) {
	for _, first := range []time.Duration{30 * time.Minute, 1<<62 + time.Second} {
		p := New(nil, Options{})
		p.SetControls("s", Controls{CircuitAfter: 1, CircuitCooldown: first})
		c := p.controls["s"]
		fail := hookbox.Outcome{Status: hookbox.StatusPending}
		p.took(c, []hookbox.Event{{ID: 1}}, time.Now(), "")
		p.ended(c, 1, fail, false)
		later := c.until.Add(time.Millisecond)
		p.took(c, []hookbox.Event{{ID: 2}}, later, "") // the trial
		before := time.Now()
		p.ended(c, 2, fail, false)
		if c.cooldown < first {
			t.Errorf("first cool-down %v: after a failed trial the cool-down is %v, shorter", first, c.cooldown)
		}
		if !c.until.After(before) {
			t.Errorf("first cool-down %v: after a failed trial the circuit is open until %v, already over", first, c.until)
		}
	}
}
