package worker

import "time"

// WithApplyBatchTimeout returns o with one batch of Applies bounded by d.
func WithApplyBatchTimeout(o Options, d time.Duration) Options {
	o.applyBatchTimeout = d
	return o
}

// WithRecordRefresh returns o with the pool's record refreshed at least
// every d.
func WithRecordRefresh(o Options, d time.Duration) Options {
	o.recordRefresh = d
	return o
}

// Quiet waits until every goroutine p started to claim and run work has
// returned, work that Stop abandoned included.
func Quiet(p *Pool) { p.wg.Wait() }

// PayloadHeld is the payload bytes p counts as held against
// MaxPayloadBytes (taken by claims, reserved by claims in flight).
func PayloadHeld(p *Pool) int64 { return p.payloadHeld.Load() }
