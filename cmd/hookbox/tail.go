package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	esc "github.com/hookbox/hookbox/internal/printable"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
)

// tailWindow is how long, by tail's own clock, tail keeps looking for
// events below the newest id it has seen: on PostgreSQL, concurrent
// transactions may commit a lower id after a higher one, so the newest id
// seen is no safe bookmark until every lower id has had tailWindow to
// commit. It is measured on tail's clock, not against the receipt times
// stored, which other hosts stamp from their own clocks: an event received
// by a host whose clock is behind would otherwise never be shown.
const tailWindow = 30 * time.Second

// tailPage is how many events one read of tail fetches.
const tailPage = 500

func newTailCmd(g *globalFlags) *cobra.Command {
	var (
		source     string
		typ        string
		lines      int
		interval   time.Duration
		jsonOut    bool
		eventsOnly bool
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print new events as they are stored, until Ctrl-C",
		Long: `tail prints the newest events (--lines, 10 by default), then every new event
as it is stored, one line each, until interrupted. It reads the database
(--db, HOOKBOX_DB or the config's db), so it sees the events of every hookbox
sharing it; on PostgreSQL it wakes as soon as one commits, elsewhere it looks
every --interval. Each event is shown once, with the status it had when first
seen. Deliveries hookbox refuses (see hookbox rejected) are followed too, on
lines marked REJECTED (not with --type, which they have none of, nor with
--events-only). --json prints one JSON object per line: an event or
{"rejected": …}, with signature and credential header values masked as in
hookbox events list --json.`,
		Example: `  hookbox tail --config hookbox.yaml
  hookbox tail --source stripe --type invoice.paid
  hookbox tail --db postgres://hookbox@db/hookbox --json | jq .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(server.CheckFilterText("--source", source), server.CheckFilterText("--type", typ)); err != nil {
				return asUsage(err)
			}
			if lines < 0 || lines > server.MaxListLimit {
				return usagef("--lines: want 0 to %d", server.MaxListLimit)
			}
			if interval <= 0 {
				return usagef("--interval: want a positive duration, like 1s")
			}
			st, err := openDB(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			t := &tailer{st: st, filter: hookbox.Filter{Source: source, EventType: typ}, out: cmd.OutOrStdout(), json: jsonOut,
				rejections: typ == "" && !eventsOnly, show: service.HeaderShower(cfg),
				errOut: cmd.ErrOrStderr(), lookTimeout: g.dbTimeoutUsed}
			return t.run(cmd.Context(), lines, interval)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "only events of this source")
	fl.StringVar(&typ, "type", "", "only events of this event type")
	fl.IntVarP(&lines, "lines", "n", 10, "how many of the newest events to print first")
	fl.DurationVar(&interval, "interval", time.Second, "how often to look for new events (PostgreSQL also wakes at each commit)")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object per line")
	fl.BoolVar(&eventsOnly, "events-only", false, "leave out refused deliveries")
	return cmd
}

// tailer follows new events of one filter.
type tailer struct {
	st     hookbox.Store
	filter hookbox.Filter
	out    io.Writer
	json   bool
	// events follows the events.
	events follow

	// rejections says whether refused deliveries are followed too;
	// rejected follows them.
	rejections bool
	rejected   follow
	// show masks the headers of every event and refusal printed, as
	// events list, the admin API and the UI do.
	show func(http.Header) http.Header
	// errOut receives the warning that looks fail, and the line saying
	// they work again (nil: nowhere).
	errOut io.Writer
	// lookTimeout, when positive, bounds each look (--db-timeout): a
	// connection that stalls fails the look instead of stopping tail
	// without a word.
	lookTimeout time.Duration
	// failedAt is when the looks started failing, zero while they read;
	// pause is how long after the last failed one the next look waits,
	// until next.
	failedAt, next time.Time
	pause          time.Duration
}

// tailRetryMax is the longest tail waits between two looks while they
// fail: it starts at --interval and doubles after each failed look.
const tailRetryMax = 30 * time.Second

// lookContext is ctx bounded by t.lookTimeout.
func (t *tailer) lookContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.lookTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, t.lookTimeout)
}

// run prints the newest lines events, then new events until ctx ends. A
// failure to read the database at the start ends it; later, a failed look
// does not: run warns once on errOut, looks again after a pause that
// grows from interval to tailRetryMax, and says when a look works again.
func (t *tailer) run(ctx context.Context, lines int, interval time.Duration) error {
	newest, err := t.start(ctx, lines)
	if err != nil {
		return err
	}
	if len(newest) > lines {
		newest = newest[:lines]
	}
	if err := t.print(newest); err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	go t.st.Listen(ctx, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
		if !t.failedAt.IsZero() && time.Now().Before(t.next) {
			continue
		}
		dbErr, outErr := t.look(ctx)
		switch {
		case outErr != nil:
			return outErr
		case ctx.Err() != nil:
			return nil
		case dbErr != nil:
			t.failed(ctx, dbErr, interval)
		}
	}
}

// failed notes a failed look: the first of a run of them is reported on
// errOut; each one puts the next look off longer, from interval up to
// tailRetryMax.
func (t *tailer) failed(ctx context.Context, err error, interval time.Duration) {
	if t.errOut == nil {
		t.errOut = io.Discard
	}
	if t.failedAt.IsZero() {
		t.failedAt, t.pause = time.Now(), interval
		fmt.Fprintf(t.errOut, "hookbox tail: cannot read the database; looking again, at pauses growing to %s, until it answers: %s\n",
			tailRetryMax, printableLines(lookError(ctx, err, t.lookTimeout)))
	} else {
		t.pause = min(2*t.pause, tailRetryMax)
	}
	t.next = time.Now().Add(t.pause)
}

// read notes a look that read the database: after failed ones, it says
// so on errOut.
func (t *tailer) read() {
	if t.failedAt.IsZero() || t.errOut == nil {
		return
	}
	fmt.Fprintf(t.errOut, "hookbox tail: reading the database again (its looks failed for %s)\n",
		time.Since(t.failedAt).Round(100*time.Millisecond))
	t.failedAt = time.Time{}
}

// start marks what is stored as seen and returns the newest lines events.
// Everything already stored is old news: it is marked seen before the
// newest are read, so that an event stored in between is either among
// the newest printed or found by the next look, never lost.
func (t *tailer) start(ctx context.Context, lines int) ([]hookbox.Event, error) {
	ctx, cancel := t.lookContext(ctx)
	defer cancel()
	if _, err := t.fresh(ctx, true); err != nil {
		return nil, err
	}
	if _, err := t.freshRejected(ctx, true); err != nil {
		return nil, err
	}
	f := t.filter
	f.Limit = max(lines, 1)
	return t.st.Events(ctx, f)
}

// look prints the events, then the refused deliveries, not seen before.
// dbErr is a failure to read them (what was not printed is looked for
// again next time); outErr a failure to print them.
func (t *tailer) look(ctx context.Context) (dbErr, outErr error) {
	ctx, cancel := t.lookContext(ctx)
	defer cancel()
	evs, err := t.fresh(ctx, false)
	if err != nil {
		return err, nil
	}
	if err := t.print(evs); err != nil {
		return nil, err
	}
	rjs, err := t.freshRejected(ctx, false)
	if err != nil {
		return err, nil
	}
	// Only a look whose every read worked ends a run of failed ones: one
	// that reads events but not refused deliveries (a role without
	// SELECT on rejected) would otherwise say both, every look.
	t.read()
	return nil, t.printRejected(rjs)
}

// freshRejected is fresh for refused deliveries (none unless t follows
// them).
func (t *tailer) freshRejected(ctx context.Context, first bool) ([]hookbox.Rejection, error) {
	if !t.rejections {
		return nil, nil
	}
	return freshIn(&t.rejected, first, func(before int64) ([]hookbox.Rejection, error) {
		return t.st.Rejections(ctx, hookbox.RejectionFilter{Source: t.filter.Source, BeforeID: before, Limit: tailPage})
	}, func(rj hookbox.Rejection) (int64, time.Time) { return rj.ID, rj.ReceivedAt })
}

// printRejected writes refused deliveries, oldest first, their headers
// masked in JSON.
func (t *tailer) printRejected(rjs []hookbox.Rejection) error {
	for _, rj := range rjs {
		var err error
		if t.json {
			var b []byte
			v := server.ViewRejection(rj, t.show, false)
			if b, err = json.Marshal(map[string]any{"rejected": v}); err == nil {
				_, err = t.out.Write(append(esc.JSON(b), '\n'))
			}
		} else {
			_, err = fmt.Fprintf(t.out, "%s  REJECTED  %s  %d  %s  from %s\n", rj.ReceivedAt.UTC().Format(time.RFC3339Nano),
				rejectedSource(rj), rj.Status, oneLine(rj.Reason), printable(rj.RemoteAddr))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fresh returns the events not seen before, oldest first, and marks them
// seen (see freshIn).
func (t *tailer) fresh(ctx context.Context, first bool) ([]hookbox.Event, error) {
	return freshIn(&t.events, first, func(before int64) ([]hookbox.Event, error) {
		f := t.filter
		f.BeforeID, f.Limit = before, tailPage
		return t.st.Events(ctx, f)
	}, func(e hookbox.Event) (int64, time.Time) { return e.ID, e.CreatedAt })
}

// follow is what tail keeps of one kind of row it follows (events, or
// refused deliveries) to show each once.
type follow struct {
	// seen holds the ids above floor already printed or passed over.
	seen map[int64]bool
	// floor is the id at and below which tail no longer looks: every id
	// below it had tailWindow to commit (see tailWindow).
	floor int64
	// marks are, oldest first, the newest id each look saw and when (by
	// tail's clock): an id visible then was drawn before, and so was
	// every id below it, so tailWindow later it becomes the floor.
	marks []idMark
	// deep is where the next look's deep page reads below (0: below
	// where its newest pages stop), and deepAt when the last one was
	// read (see tailDeepEvery).
	deep   int64
	deepAt time.Time
}

// tailDeepEvery is how often a look reads one page more, below the
// pages it has seen all of: a row that commits late (PostgreSQL) below
// a page of rows shown since is otherwise never read again. Each such
// page starts where the last one ended, down to the floor, then from the
// top again, so every row within tailWindow is read again before the
// floor passes it while that window holds well under
// tailPage*tailWindow/tailDeepEvery rows (75,000, at which one pass
// takes the whole window): a late row is shown at rates well under 2,500
// events a second (one pass takes 12 s at 1,000 a second), and the deep
// pages cost 2,500 rows read a second at most.
const tailDeepEvery = 200 * time.Millisecond

type idMark struct {
	at time.Time
	id int64
}

// freshIn reads rows newest first, a page at a time (page lists those
// below an id, 0 for the newest), and returns those above f's floor not
// in f's seen, oldest first, marking them seen (none, when a page fails); it stops at a page it has
// seen all of (after one page more, below, every tailDeepEvery), or one
// that reaches the floor. The first look marks what
// is stored as seen, reading back until a row received tailWindow before
// now (by key's time: only where to stop, not what to show) or the
// oldest, and puts the floor under the oldest row it read.
func freshIn[T any](f *follow, first bool, page func(before int64) ([]T, error), key func(T) (int64, time.Time)) ([]T, error) {
	if f.seen == nil {
		f.seen = map[int64]bool{}
	}
	start := time.Now()
	var out []T
	var before, top, lowest int64
	deep := false // this page is the look's deep one
	for {
		rows, err := page(before)
		if err != nil {
			// What this look marked seen was not shown: the next
			// look finds it again.
			for _, r := range out {
				id, _ := key(r)
				delete(f.seen, id)
			}
			return nil, err
		}
		unseen, floored := 0, false
		var last time.Time
		for _, r := range rows {
			id, at := key(r)
			top, last = max(top, id), at
			if id <= f.floor {
				floored = true
				continue
			}
			lowest = id
			if !f.seen[id] {
				unseen++
				f.seen[id] = true
				out = append(out, r)
			}
		}
		if len(rows) < tailPage || floored {
			if deep {
				f.deep = 0 // the deep pages reached the floor: from the top next
			}
			break
		}
		if deep {
			f.deep, _ = key(rows[len(rows)-1])
			break
		}
		if first && last.Before(start.Add(-tailWindow)) {
			break
		}
		before, _ = key(rows[len(rows)-1])
		if !first && unseen == 0 {
			if start.Sub(f.deepAt) < tailDeepEvery {
				break
			}
			deep, f.deepAt = true, start
			if f.deep > f.floor+1 && f.deep < before {
				before = f.deep
			}
		}
	}
	now := time.Now()
	if first && lowest > 0 {
		f.floor = lowest - 1
	}
	if top > 0 && (len(f.marks) == 0 || f.marks[len(f.marks)-1].id < top) {
		f.marks = append(f.marks, idMark{now, top})
	}
	for len(f.marks) > 0 && !f.marks[0].at.After(now.Add(-tailWindow)) {
		f.floor = max(f.floor, f.marks[0].id)
		f.marks = f.marks[1:]
	}
	for id := range f.seen {
		if id <= f.floor {
			delete(f.seen, id)
		}
	}
	slices.SortFunc(out, func(a, b T) int {
		ia, _ := key(a)
		ib, _ := key(b)
		return cmp.Compare(ia, ib)
	})
	return out, nil
}

// print writes events, given newest first or oldest first, oldest first,
// their headers masked (only JSON shows them).
func (t *tailer) print(evs []hookbox.Event) error {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, byID)
	for _, e := range evs {
		e.Header = t.show(e.Header)
		if e.ID > t.events.floor {
			t.events.seen[e.ID] = true
		}
		var err error
		if t.json {
			var b []byte
			if b, err = json.Marshal(e); err == nil {
				_, err = t.out.Write(append(esc.JSON(b), '\n'))
			}
		} else {
			_, err = fmt.Fprintf(t.out, "%s  %d  %s  %s  %s  attempts=%d  %s\n", e.CreatedAt.UTC().Format(time.RFC3339Nano), e.ID,
				printable(e.Source), orDash(printable(e.EventType)), e.Status, e.Attempts, eventDeliveryID(e))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// byID orders events by id, oldest first.
func byID(a, b hookbox.Event) int { return cmp.Compare(a.ID, b.ID) }
