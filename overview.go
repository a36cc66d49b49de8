package hookbox

import (
	"context"
	"slices"
	"strings"
	"time"
)

// OverviewMinutes is the span of SourceOverview's per-minute counts.
const OverviewMinutes = 60

// SourceOverview sums up one source's events for the operator's overview.
type SourceOverview struct {
	Source   string
	ByStatus map[Status]int
	// OldestDue is when the longest-waiting due event of the source became
	// due; zero when none is due.
	OldestDue time.Time
	// Stored and Rejected count, per minute over the last
	// OverviewMinutes (oldest first, the current minute last), the events
	// stored and the deliveries the rejection log kept. Unknown source
	// names are summed under the source "".
	Stored, Rejected [OverviewMinutes]int
}

// Overviewer sums up the store per source for the operator.
type Overviewer interface {
	// Overview returns one SourceOverview per source that has events or
	// rejections, sorted by name. It reads every event once (as Stats
	// does), so it is for an operator's page, not a hot path.
	Overview(ctx context.Context, now time.Time) ([]SourceOverview, error)
}

// OverviewMinute returns the index in SourceOverview's per-minute arrays
// of a time at, for an overview made at now, and whether at falls in it.
func OverviewMinute(at, now time.Time) (int, bool) {
	back := int(now.Truncate(time.Minute).Sub(at.Truncate(time.Minute)) / time.Minute)
	if back < 0 || back >= OverviewMinutes {
		return 0, false
	}
	return OverviewMinutes - 1 - back, true
}

// OverviewBuilder gathers the rows a store reads for Overview into
// SourceOverviews, so that both stores assemble them the same way.
type OverviewBuilder struct {
	now     time.Time
	sources map[string]*SourceOverview
}

// NewOverviewBuilder starts an overview made at now.
func NewOverviewBuilder(now time.Time) *OverviewBuilder {
	return &OverviewBuilder{now: now, sources: map[string]*SourceOverview{}}
}

// Since is the start of the overview's per-minute span.
func (b *OverviewBuilder) Since() time.Time {
	return b.now.Truncate(time.Minute).Add(-(OverviewMinutes - 1) * time.Minute)
}

func (b *OverviewBuilder) source(name string) *SourceOverview {
	o := b.sources[name]
	if o == nil {
		o = &SourceOverview{Source: name, ByStatus: map[Status]int{}}
		b.sources[name] = o
	}
	return o
}

// Count adds n events of source in status st.
func (b *OverviewBuilder) Count(source string, st Status, n int) { b.source(source).ByStatus[st] += n }

// Due records the oldest due time of source's events.
func (b *OverviewBuilder) Due(source string, at time.Time) { b.source(source).OldestDue = at.UTC() }

// Stored adds n events of source stored in the minute of at.
func (b *OverviewBuilder) Stored(source string, at time.Time, n int) {
	if i, ok := OverviewMinute(at, b.now); ok {
		b.source(source).Stored[i] += n
	}
}

// Rejected adds n rejections of source ("" for unknown names) kept in the
// minute of at.
func (b *OverviewBuilder) Rejected(source string, at time.Time, n int) {
	if i, ok := OverviewMinute(at, b.now); ok {
		b.source(source).Rejected[i] += n
	}
}

// Result returns the overviews sorted by source name.
func (b *OverviewBuilder) Result() []SourceOverview {
	out := make([]SourceOverview, 0, len(b.sources))
	for _, o := range b.sources {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(x, y SourceOverview) int { return strings.Compare(x.Source, y.Source) })
	return out
}
