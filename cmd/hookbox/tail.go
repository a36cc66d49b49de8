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
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
)

// tailWindow is how far back, by receipt time, tail looks for events it
// has not shown yet: on PostgreSQL, concurrent transactions may commit a
// lower id after a higher one, so the newest id seen is no safe bookmark.
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
				return err
			}
			if lines < 0 || lines > server.MaxListLimit {
				return fmt.Errorf("--lines: want 0 to %d", server.MaxListLimit)
			}
			if interval <= 0 {
				return errors.New("--interval: want a positive duration, like 1s")
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
				seen: map[int64]time.Time{}, rejections: typ == "" && !eventsOnly, show: service.HeaderShower(cfg),
				seenRejected: map[int64]time.Time{}}
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
	// seen holds the events already printed or passed over, by id, with
	// their receipt time, for as long as they are inside tailWindow.
	seen map[int64]time.Time

	// rejections says whether refused deliveries are followed too;
	// seenRejected is seen for them.
	rejections   bool
	seenRejected map[int64]time.Time
	// show masks the headers of every event and refusal printed, as
	// events list, the admin API and the UI do.
	show func(http.Header) http.Header
}

// run prints the newest lines events, then new events until ctx ends.
func (t *tailer) run(ctx context.Context, lines int, interval time.Duration) error {
	// Everything already in the window is old news: mark it seen before
	// reading the newest, so that an event stored in between is either
	// among the newest printed or found by the next look, never lost.
	if _, err := t.fresh(ctx, time.Now()); err != nil {
		return err
	}
	if _, err := t.freshRejected(ctx, time.Now()); err != nil {
		return err
	}
	f := t.filter
	f.Limit = max(lines, 1)
	newest, err := t.st.Events(ctx, f)
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
		evs, err := t.fresh(ctx, time.Now())
		var rjs []hookbox.Rejection
		if err == nil {
			rjs, err = t.freshRejected(ctx, time.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := t.print(evs); err != nil {
			return err
		}
		if err := t.printRejected(rjs); err != nil {
			return err
		}
	}
}

// freshRejected is fresh for refused deliveries (none unless t follows
// them).
func (t *tailer) freshRejected(ctx context.Context, now time.Time) ([]hookbox.Rejection, error) {
	if !t.rejections {
		return nil, nil
	}
	since := now.Add(-tailWindow)
	return freshIn(t.seenRejected, since, func(before int64) ([]hookbox.Rejection, error) {
		return t.st.Rejections(ctx, hookbox.RejectionFilter{Source: t.filter.Source, Since: since, BeforeID: before, Limit: tailPage})
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
				_, err = t.out.Write(append(b, '\n'))
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

// fresh returns the events received within tailWindow of now that were
// not seen before, oldest first, and marks them seen.
func (t *tailer) fresh(ctx context.Context, now time.Time) ([]hookbox.Event, error) {
	return freshIn(t.seen, now.Add(-tailWindow), func(before int64) ([]hookbox.Event, error) {
		f := t.filter
		f.Since, f.BeforeID, f.Limit = now.Add(-tailWindow), before, tailPage
		return t.st.Events(ctx, f)
	}, func(e hookbox.Event) (int64, time.Time) { return e.ID, e.CreatedAt })
}

// freshIn reads rows newest first, a page at a time (page lists those
// below an id, 0 for the newest), and returns those not in seen, oldest
// first, marking them seen with their time; it stops at a page it has
// seen all of. Rows of seen older than since are forgotten first.
func freshIn[T any](seen map[int64]time.Time, since time.Time, page func(before int64) ([]T, error), key func(T) (int64, time.Time)) ([]T, error) {
	for id, at := range seen {
		if at.Before(since) {
			delete(seen, id)
		}
	}
	var out []T
	var before int64
	for {
		rows, err := page(before)
		if err != nil {
			return nil, err
		}
		unseen := 0
		for _, r := range rows {
			id, at := key(r)
			if _, ok := seen[id]; !ok {
				unseen++
				seen[id] = at
				out = append(out, r)
			}
		}
		if len(rows) < tailPage || unseen == 0 {
			break
		}
		before, _ = key(rows[len(rows)-1])
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
		t.seen[e.ID] = e.CreatedAt
		var err error
		if t.json {
			var b []byte
			if b, err = json.Marshal(e); err == nil {
				_, err = t.out.Write(append(b, '\n'))
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
