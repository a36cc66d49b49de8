package worker

import "time"

// WithApplyBatchTimeout returns o with one batch of Applies bounded by d.
func WithApplyBatchTimeout(o Options, d time.Duration) Options {
	o.applyBatchTimeout = d
	return o
}
