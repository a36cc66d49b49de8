package worker

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestTrialJudgedByItsOwnEnd: deliveries claimed before the circuit
// opened may end after its trial was claimed. Their failure is counted,
// but it is not the trial's: the cool-down stays, and no second trial is
// claimed while the first runs. The trial's own failure then doubles the
// cool-down.
func TestTrialJudgedByItsOwnEnd(t *testing.T) {
	p := New(nil, Options{})
	p.SetControls("s", Controls{CircuitAfter: 2, CircuitCooldown: time.Minute, MaxConcurrency: 10})
	c := p.controls["s"]
	now := time.Now()
	p.took(c, []hookbox.Event{{ID: 1}, {ID: 2}, {ID: 3}}, now, "")
	fail := hookbox.Outcome{Status: hookbox.StatusPending}
	p.ended(c, 1, fail, false)
	p.ended(c, 2, fail, false)
	if !c.open {
		t.Fatal("two failures in a row did not open the circuit")
	}
	later := c.until.Add(time.Millisecond) // the cool-down is over
	if n, _ := p.allowance(c, 10, later); n != 1 {
		t.Fatalf("allowance after the cool-down = %d, want 1 (the trial)", n)
	}
	p.took(c, []hookbox.Event{{ID: 4}}, later, "")
	p.ended(c, 3, fail, false) // the old delivery, not the trial
	if !c.trial || c.cooldown != time.Minute {
		t.Errorf("an old delivery's failure was taken for the trial's: trial %v, cool-down %v", c.trial, c.cooldown)
	}
	if n, _ := p.allowance(c, 10, later); n != 0 {
		t.Errorf("allowance = %d while the trial runs, want 0", n)
	}
	p.ended(c, 4, fail, false) // the trial
	if c.trial || !c.open || c.cooldown != 2*time.Minute {
		t.Errorf("after the trial failed: trial %v, open %v, cool-down %v; want false, true, 2m", c.trial, c.open, c.cooldown)
	}
}

// TestOldSuccessClosesCircuit: a delivery claimed before the circuit
// opened that succeeds closes it; the trial still running then counts as
// any delivery, its failure one failure in a row.
func TestOldSuccessClosesCircuit(t *testing.T) {
	p := New(nil, Options{})
	p.SetControls("s", Controls{CircuitAfter: 2, CircuitCooldown: time.Minute})
	c := p.controls["s"]
	p.took(c, []hookbox.Event{{ID: 1}, {ID: 2}, {ID: 3}}, time.Now(), "")
	fail := hookbox.Outcome{Status: hookbox.StatusPending}
	p.ended(c, 1, fail, false)
	p.ended(c, 2, fail, false)
	later := c.until.Add(time.Millisecond)
	p.took(c, []hookbox.Event{{ID: 4}}, later, "")
	p.ended(c, 3, hookbox.Outcome{Status: hookbox.StatusDone}, false)
	if c.open || c.trial {
		t.Fatalf("a success left the circuit open %v, trial %v", c.open, c.trial)
	}
	p.ended(c, 4, fail, false)
	if c.open || c.fails != 1 {
		t.Errorf("the late trial's failure: open %v, failures %d; want closed, 1", c.open, c.fails)
	}
}
