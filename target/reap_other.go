//go:build !linux

package target

import "context"

// ReapOrphans does nothing but wait for ctx outside Linux, where hookbox
// does not run as PID 1; see the Linux version.
func ReapOrphans(ctx context.Context) { <-ctx.Done() }
