package groupcommit

import (
	"context"
	"sync/atomic"
)

// A Hold gives back what an item holds (a delivery's body counted against
// a budget, say) once nobody holds the item any longer: its maker, until
// it calls Release, and a Committer that queued it, until the batch that
// held it has finished. Submit may return before that (its ctx ended),
// and the item, still queued or in a transaction, keeps its memory; a
// budget released when Submit returns would no longer count it.
//
// The release func runs exactly once, in whichever of them lets go last.
type Hold struct {
	release func()
	refs    atomic.Int32
	let     atomic.Bool // the maker's Release was called
}

// NewHold returns a Hold that its maker holds; release runs once the
// maker has called Release and no Committer holds the item.
func NewHold(release func()) *Hold {
	h := &Hold{release: release}
	h.refs.Store(1)
	return h
}

// Release lets go of the maker's part: release runs now, unless a
// Committer still holds the item, then as it lets go. Calls after the
// first do nothing, and so does a nil Hold's.
func (h *Hold) Release() {
	if h != nil && h.let.CompareAndSwap(false, true) {
		h.drop()
	}
}

// take adds a holder; drop removes one, and the last runs release.
func (h *Hold) take() { h.refs.Add(1) }

func (h *Hold) drop() {
	if h.refs.Add(-1) == 0 {
		h.release()
	}
}

type holdKey struct{}

// WithHold returns ctx carrying h (ctx itself for a nil h): a Committer
// given an item by Submit with that ctx holds h, while the item is queued
// or in a batch, also after Submit returned.
func WithHold(ctx context.Context, h *Hold) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, holdKey{}, h)
}

// holdOf returns the Hold ctx carries, or nil.
func holdOf(ctx context.Context) *Hold {
	h, _ := ctx.Value(holdKey{}).(*Hold)
	return h
}
