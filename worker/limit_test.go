package worker

import "testing"

// TestTxLimitAdapts: the claim size for Go handlers halves (not below what
// ran) when the claiming transaction leaves events unrun, and doubles back
// to BatchSize only after txGrowAfter whole claims in a row.
func TestTxLimitAdapts(t *testing.T) {
	p := New(nil, Options{BatchSize: 256})
	step := func(claimed, ran, want int) {
		t.Helper()
		p.adaptTxLimit(p.txLimit(), claimed, ran)
		if got := p.txLimit(); got != want {
			t.Fatalf("after claiming %d and running %d: limit %d, want %d", claimed, ran, got, want)
		}
	}
	if p.txLimit() != 256 {
		t.Fatalf("initial limit %d, want BatchSize", p.txLimit())
	}
	step(256, 256, 256) // whole claims at BatchSize: nothing to change
	step(256, 64, 128)  // a store cap at 64: halve
	step(128, 64, 64)   // and again, to what ran
	step(64, 10, 32)    // a slow claim: halve, not down to 10
	step(20, 20, 32)    // a short claim (the queue ran dry) says nothing
	for range txGrowAfter - 1 {
		step(32, 32, 32)
	}
	step(32, 32, 64) // txGrowAfter whole claims: double
	step(64, 0, 32)
	step(32, 1, 16)
	p.opts.BatchSize = 20 // growth stops at BatchSize
	for range txGrowAfter - 1 {
		step(16, 16, 16)
	}
	step(16, 16, 20)
}
