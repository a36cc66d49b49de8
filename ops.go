package hookbox

import (
	"context"
	"time"
)

// ReplayParams select events to put back in the queue.
type ReplayParams struct {
	// IDs names events one by one; when empty, Filter selects them.
	IDs    []int64
	Filter Filter
	// IncludeDone allows replaying events that already succeeded. Without
	// it only dead and pending events are replayed.
	IncludeDone bool
	// DryRun reports what would be replayed and changes nothing.
	DryRun bool
	// Now is when the events become due (zero: time.Now()).
	Now time.Time
}

// ReplayResult says what a replay did (or, dry, would do).
type ReplayResult struct {
	Replayed []int64 `json:"replayed"` // back to pending with a fresh attempt budget
	// Skipped are named events left alone: in flight, or done without
	// IncludeDone, or missing.
	Skipped []int64 `json:"skipped,omitempty"`
}

// PurgeParams say which finished events to delete.
type PurgeParams struct {
	// Before deletes finished events whose last change is older than it.
	Before time.Time
	// IncludeDead deletes dead events too; by default they are kept, since
	// their work never succeeded.
	IncludeDead bool
	// DryRun counts and deletes nothing.
	DryRun bool
	// BatchSize bounds the rows deleted per transaction (default 1000), so a
	// purge never holds a long lock.
	BatchSize int
}

// PurgeResult counts what a purge deleted (or, dry, would delete).
type PurgeResult struct {
	Done int `json:"done"`
	Dead int `json:"dead"`
}

// Stats summarise the queue for metrics.
type Stats struct {
	ByStatus map[Status]int `json:"by_status"`
	// OldestDue is when the longest-waiting due pending event became due;
	// zero when none is due.
	OldestDue time.Time `json:"oldest_due"`
}

// Ops is the operator side of a store: replay, retention and statistics.
// Each operation touches only rows in the states it names, guarded in the
// statement itself, so it cannot race a worker into a wrong state.
type Ops interface {
	// Replay sends events back to pending, due now, with attempts reset; the
	// row (the dedupe memory) stays the same row. Events in flight are
	// never touched.
	Replay(ctx context.Context, p ReplayParams) (ReplayResult, error)

	// Purge deletes finished events (done, and dead if asked) older than
	// p.Before, in batches. Pending and processing events are never
	// deleted. A redelivery of a purged id is stored and worked again.
	Purge(ctx context.Context, p PurgeParams) (PurgeResult, error)

	// ClearPayloads drops the payload of done events finished before
	// before, keeping id, status, headers and timestamps (the dedupe
	// memory). It returns how many payloads it cleared.
	ClearPayloads(ctx context.Context, before time.Time) (int, error)

	// Stats counts events by status and finds the oldest due event.
	Stats(ctx context.Context, now time.Time) (Stats, error)
}

// Add counts n purged rows of status st.
func (r *PurgeResult) Add(st Status, n int) {
	switch st {
	case StatusDone:
		r.Done += n
	case StatusDead:
		r.Dead += n
	}
}

// Missing returns the ids of want that are not in got, in want's order.
func Missing(want, got []int64) []int64 {
	seen := make(map[int64]bool, len(got))
	for _, id := range got {
		seen[id] = true
	}
	var out []int64
	for _, id := range want {
		if !seen[id] {
			out = append(out, id)
		}
	}
	return out
}
