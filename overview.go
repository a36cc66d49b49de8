package hookbox

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"
)

// OverviewMinutes is the span of SourceOverview's per-minute counts.
const OverviewMinutes = 60

// SourceOverview sums up one source's events for the operator's overview.
type SourceOverview struct {
	Source string
	// ByStatus counts the source's unfinished (pending, processing) and
	// dead events. Done events are not counted: a count of them reads
	// every finished event (at ten million, seconds at each page load),
	// and the console does not show it; hookbox_events has the total.
	ByStatus map[Status]int
	// OldestDue is when the longest-waiting due event of the source became
	// due; zero when none is due. As Stats.OldestDue, it is on the store's
	// clock.
	OldestDue time.Time
	// OldestDueAge is how long that event has been due, as
	// Stats.OldestDueAge: what the console shows.
	OldestDueAge time.Duration
	// Stored and Rejected count, per minute over the last
	// OverviewMinutes (oldest first, the current minute last), the events
	// stored and the deliveries the rejection log kept. Unknown source
	// names are summed under the source "".
	Stored, Rejected [OverviewMinutes]int
}

// Overviewer sums up the store per source for the operator.
type Overviewer interface {
	// Overview returns one SourceOverview per source that has events or
	// rejections, sorted by name. It finds the sources with one index
	// seek per source, counts from indexes of the unfinished and the dead
	// events only (what it reads grows with those, never with the done
	// ones), and its chart reads the events of its span (WalkStored); it
	// is for an operator's page, not a hot path.
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

// StoredRow is an event as the overview's chart counts it.
type StoredRow struct {
	ID      int64
	Source  string
	Created time.Time
}

// OverviewOldRun is how many events in a row stored before the chart's
// span WalkStored passes before it stops.
const OverviewOldRun = 10000

// overviewPage is how many events WalkStored asks page for at a time.
const overviewPage = 1000

// WalkStored adds to the chart the events stored in its span, walking
// down the ids from the newest: page returns up to n events with ids
// below before, newest first. Ids follow the order events are stored in,
// and their times with them but for a few (a slow upload; a library user
// storing deliveries received earlier), so the walk stops after
// OverviewOldRun events in a row from before the span: what the chart
// costs is the span's events and that many more, however many are
// stored. An event of the span stored before such a stretch is not
// counted.
func (b *OverviewBuilder) WalkStored(page func(before int64, n int) ([]StoredRow, error)) error {
	since := b.Since()
	before, old := int64(math.MaxInt64), 0
	for {
		rows, err := page(before, overviewPage)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Created.Before(since) {
				if old++; old >= OverviewOldRun {
					return nil
				}
				continue
			}
			old = 0
			b.Stored(r.Source, r.Created, 1)
		}
		if len(rows) < overviewPage {
			return nil
		}
		before = rows[len(rows)-1].ID
	}
}

func (b *OverviewBuilder) source(name string) *SourceOverview {
	o := b.sources[name]
	if o == nil {
		o = &SourceOverview{Source: name, ByStatus: map[Status]int{}}
		b.sources[name] = o
	}
	return o
}

// Source lists source, one that has events, with no counts yet.
func (b *OverviewBuilder) Source(source string) { b.source(source) }

// Count adds n events of source in status st.
func (b *OverviewBuilder) Count(source string, st Status, n int) { b.source(source).ByStatus[st] += n }

// Due records the oldest due time of source's events, and how long it has
// been due (see Stats.OldestDueAge).
func (b *OverviewBuilder) Due(source string, at time.Time, age time.Duration) {
	o := b.source(source)
	o.OldestDue, o.OldestDueAge = at.UTC(), age
}

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
